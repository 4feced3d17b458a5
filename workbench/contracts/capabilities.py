"""What a policy declares, and what the runtime hands it at load and at each reset.

>>> caps = Capabilities("metaworld-v1", ("state",), chunk_size=8)
>>> caps.chunk_size, caps.max_batch
(8, 1)
>>> Capabilities("metaworld-v1", ("state",), max_batch=0)
Traceback (most recent call last):
...
ValueError: max_batch: expected >= 1; got 0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

Observation = Mapping[str, Any]
"""Canonical features by name, plus ``episode_id`` and ``step``."""


@dataclass(frozen=True)
class Capabilities:
    """What a policy declares before any episode runs.

    action_protocol: the protocol name whose action contract it emits.
    features: canonical observation features the policy reads.
    chunk_size: actions returned per call (1 = one action per step).
    native_batching / max_batch: whether ``act_batch`` runs one batched computation,
    and the largest batch it takes. A native ``act_batch`` that raises must leave every
    episode's state as it was: the runtime then retries the observations one at a time,
    so one episode's fault does not fail the others of its batch.
    privileged: reads privileged simulator state; results are diagnostics only.
    runtime_invariant: an episode's actions depend only on its observations and
    identity, never on the batch it is served in or the process that serves it
    (deterministic and batch-invariant). The concurrency search then records its probe
    episodes as episodes of the run (they would come out the same in any configuration).
    """

    action_protocol: str
    features: tuple[str, ...]
    chunk_size: int = 1
    native_batching: bool = False
    max_batch: int = 1
    privileged: bool = False
    runtime_invariant: bool = False

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size: expected >= 1; got {self.chunk_size}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch: expected >= 1; got {self.max_batch}")


@dataclass(frozen=True)
class Stop:
    """What ``act`` returns instead of actions to end its episode voluntarily. The call
    counts; no control executes; the benchmark's success at that moment stands."""

    reason: str = "policy stop"


@dataclass(frozen=True)
class LoadContext:
    """Passed to ``load``: where the replica runs and which protocol it serves."""

    protocol: str
    device: str = "cpu"
    replica_id: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EpisodeContext:
    """Passed to ``reset``: identity of one episode. ``seed`` depends only on identity."""

    episode_id: str
    task: str
    instruction: str
    seed: int
