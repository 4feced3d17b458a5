"""Where every backend claims and records episodes, and what a run measured.

:class:`RecordSink` is the one way an episode gets claimed and its result written
(to the run's SQLite records, with a progress bar showing success so far); a sink
without a store (a search probe) keeps the rows only. :class:`RunReport` is what one
execution of a plan measured, whatever the backend.
"""

from __future__ import annotations

import math

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from workbench.config import PoolConfig
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.results import EpisodeResult, ErrorKind
from workbench.records.media import wants_video
from workbench.records.store import RecordStore


def video_episodes(plan: Sequence[EpisodeSpec], video: str | int) -> set[str]:
    """Ids of the episodes to film: the first N of the plan in canonical order, so the
    choice never depends on the backend, the workers or what an earlier run finished.

    >>> from workbench.contracts.plan import plan_episodes
    >>> sorted(video_episodes(plan_episodes("m", "s", ["a"], 3), 2))
    ['m/s/a/0000', 'm/s/a/0001']
    """
    return {s.episode_id for i, s in enumerate(sorted(plan)) if wants_video(video, i)}


class RecordSink:
    """Claims episodes of ``run_id`` and records their results; ``store`` None keeps
    rows only. ``label`` and ``total`` describe the progress bar (``progress``);
    ``before_claim`` is called before every claim (raising stops the run unclaimed)."""

    def __init__(self, store: RecordStore | None, run_id: str | None, label: str = "episodes",
                 total: int | None = None, progress: bool = False,
                 before_claim: Callable[[], None] | None = None) -> None:
        self.store, self.run_id = store, run_id
        self.before_claim = before_claim
        self.rows: list[dict[str, Any]] = []
        self._bar = tqdm(total=total, desc=label, unit="ep", disable=not progress)
        self._wins = 0

    def pending(self, plan: Sequence[EpisodeSpec]) -> list[EpisodeSpec]:
        """``plan``'s episodes not yet claimed, in canonical order."""
        todo = sorted(plan)
        if self.store is None:
            return todo
        pending = set(self.store.pending(self.run_id))
        return [s for s in todo if s.episode_id in pending]

    def claim(self, spec: EpisodeSpec, worker: str) -> bool:
        """Claim one planned episode; False if it was claimed before (never run twice)."""
        if self.store is None:
            return True
        if self.before_claim is not None:
            self.before_claim()
        return self.store.claim(self.run_id, spec.episode_id, worker)

    def finish(self, spec: EpisodeSpec, result: EpisodeResult, worker: str) -> dict[str, Any]:
        """Record ``result`` for a claimed episode; returns its row."""
        if self.store is not None:
            self.store.finish(self.run_id, spec.episode_id, result)
        row = {**spec.to_dict(), **result.__dict__, "worker": worker,
               "error_kind": None if result.error_kind is None else result.error_kind.value}
        self.rows.append(row)
        self._wins += bool(result.success)
        self._bar.update(1)
        self._bar.set_postfix(success=f"{self._wins}/{len(self.rows)}")
        return row

    def fail(self, spec: EpisodeSpec, message: str, worker: str) -> dict[str, Any]:
        """Record an infrastructure error for ``spec``, claiming it first if nobody had
        (an episode that never reached a live worker)."""
        if self.store is not None:
            self.store.claim(self.run_id, spec.episode_id, worker)
        return self.finish(spec, EpisodeResult.failed(ErrorKind.INFRASTRUCTURE, message),
                           worker)

    def close(self) -> None:
        self._bar.close()


@dataclass
class RunReport:
    """What one execution of a plan measured.

    rows: one dict per finished episode (identity, result, worker); wall_s: seconds
    from the first episode to the last; busy_cores: CPU seconds of the backend's
    processes over wall_s; peak_rss_bytes: their largest summed resident memory;
    setup_s: seconds before the first episode (processes, model loads, warm-up);
    replica_stats: per replica, batches served and their sizes (pool backend);
    gpu_util_pct: the mean utilisation NVML reported for GPU 0 (NaN without a GPU);
    searches: the concurrency searches of the Ray backend's shards, one per shard.
    """

    backend: str
    pool: PoolConfig | None
    rows: list[dict[str, Any]]
    wall_s: float
    busy_cores: float
    peak_rss_bytes: int
    setup_s: float = 0.0
    replica_stats: list[Any] = field(default_factory=list)
    complete: bool = True
    failures: list[str] = field(default_factory=list)
    gpu_util_pct: float = math.nan
    searches: list[Any] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return sum(int(r["steps"]) for r in self.rows)

    def _repr_html_(self) -> str:
        """In a notebook: what this execution measured, one line a quantity."""
        from workbench.contracts.display import heading, key_value_table

        rows = [("configuration", self.pool.label if self.pool else None),
                ("episodes", len(self.rows)), ("successes", self.successes),
                ("steps", self.steps), ("set-up (s)", self.setup_s),
                ("evaluation (s)", self.wall_s), ("steps/s", self.steps_per_s),
                ("busy cores", self.busy_cores),
                ("peak memory (GiB)", self.peak_rss_bytes / 2**30)]
        if not math.isnan(self.gpu_util_pct):
            rows.append(("GPU utilisation (%)", self.gpu_util_pct))
        rows += [("stopped", failure) for failure in self.failures]
        return heading("RunReport", f"{self.backend} backend") + key_value_table(rows)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def successes(self) -> int:
        return sum(bool(r["success"]) for r in self.rows)

    @property
    def policy_calls(self) -> int:
        return sum(int(r["policy_calls"]) for r in self.rows)

    def batch_sizes(self) -> Counter:
        """How many batches of each size the replicas served."""
        return Counter(size for stats in self.replica_stats for size in stats.sizes)
