"""The plan of episodes: identities that decide everything about an episode's outcome.

An episode's seed depends only on its identity (benchmark, suite, task, initial
state), never on which worker, shard or machine runs it.

>>> spec = EpisodeSpec("metaworld", "MT10", "reach-v3", 2, 2)
>>> spec.episode_id
'metaworld/MT10/reach-v3/0002'
>>> spec.seed == EpisodeSpec("metaworld", "MT10", "reach-v3", 2, 2).seed
True
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True, order=True)
class EpisodeSpec:
    """One planned episode. Ordered by (benchmark, suite, task, init_state_id)."""

    benchmark: str
    suite: str
    task: str
    init_state_id: int
    episode_index: int

    @property
    def episode_id(self) -> str:
        return f"{self.benchmark}/{self.suite}/{self.task}/{self.episode_index:04d}"

    @property
    def seed(self) -> int:
        """A 31-bit seed derived from the episode's identity alone."""
        digest = hashlib.sha256(self.episode_id.encode()).digest()
        return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF

    def to_dict(self) -> dict:
        return asdict(self) | {"episode_id": self.episode_id, "seed": self.seed}


def plan_episodes(benchmark: str, suite: str, tasks: Iterable[str],
                  episodes_per_task: int, start: int = 0) -> list[EpisodeSpec]:
    """Episodes ``start .. start+episodes_per_task-1`` of each task, sorted canonically.

    Episode ``i`` of a task uses initial state ``i`` of that task.

    >>> [s.episode_index for s in plan_episodes("metaworld", "MT10", ["b", "a"], 2)]
    [0, 1, 0, 1]
    """
    if episodes_per_task < 1:
        raise ValueError(f"episodes_per_task: expected >= 1; got {episodes_per_task}")
    return sorted(EpisodeSpec(benchmark, suite, t, i, i)
                  for t in tasks for i in range(start, start + episodes_per_task))


def shard_episodes(plan: Sequence[EpisodeSpec], num_shards: int, shard: int) -> list[EpisodeSpec]:
    """The episodes of one shard: canonical order, then every ``num_shards``-th from ``shard``.

    >>> p = plan_episodes("m", "s", ["a"], 5)
    >>> [e.episode_index for e in shard_episodes(p, 2, 1)]
    [1, 3]
    """
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard: expected in [0, {num_shards}); got {shard}")
    return sorted(plan)[shard::num_shards]
