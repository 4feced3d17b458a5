"""Runtime experiments behind the notebooks: the pool sweep, the variant ladder, outcome
agreement, the search table and hand-made probes.

Each runs the workload of one :class:`~workbench.config.EvalConfig` through the runner
(:func:`workbench.runner.run`), several times, and returns a DataFrame whose rows mirror
a table of the first source paper, measured on this machine. Every row runs the same
episode list; records go to a temporary folder (these are measurements, not results
to keep). Numbers are kept at full precision; round them where a table is shown.
"""

from __future__ import annotations

import math
import tempfile
import weakref
from dataclasses import replace
from typing import Any, Mapping, Sequence

import pandas as pd

from workbench.config import EvalConfig, PoolConfig, as_config
from workbench.runner import EvalRun, open_pool, open_ray_pool, run
from workbench.runtime.agreement import outcome_agreement
from workbench.runtime.pool import EvalPool
from workbench.runtime.ray_backend import ensure_ray
from workbench.runtime.resources import memory_held
from workbench.runtime.search import GIB, SearchResult, probe_row

ConfigLike = EvalConfig | Mapping[str, Any]


def pool_configs(configurations: Sequence[Sequence[int]],
                 max_wait_ms: float = 5.0) -> list[PoolConfig]:
    """``[workers, replicas]`` or ``[workers, replicas, max_batch]`` lists as PoolConfigs
    (a missing batch size is derived: ``PoolConfig.batch``).

    >>> [c.label for c in pool_configs([[2, 1], [4, 2, 1]])]
    ['2w/1r b2', '4w/2r b1']
    """
    return [PoolConfig(*c[:2], max_batch=c[2] if len(c) > 2 else None, max_wait_ms=max_wait_ms)
            for c in configurations]


def _scratch(config: ConfigLike, folder: str, **changes: Any) -> EvalConfig:
    """``config`` writing its records under ``folder``, quietly."""
    return as_config(config).replace(output_dir=folder, progress=False, video="off", **changes)


def run_row(result: EvalRun) -> dict[str, Any]:
    """One table row of a run: configuration, outcome, time, rate, cores and memory."""
    report = result.report
    row = {"backend": report.backend, "episodes": len(report.rows),
           "successes": report.successes, "steps": report.steps,
           "observations": sum(int(r["observations"]) for r in report.rows),
           "setup_s": report.setup_s, "eval_s": report.wall_s, "e2e_s": result.e2e_s,
           "steps_per_s": report.steps_per_s if report.rows else math.nan,
           "busy_cores": report.busy_cores,
           "peak_mem_gib": report.peak_rss_bytes / GIB}
    if report.pool is not None and report.backend == "pool":
        row = {"workers": report.pool.workers, "replicas": report.pool.replicas,
               "max_batch": report.pool.batch, **row}
    return row


def sweep_pool(config: ConfigLike, configurations: Sequence[PoolConfig]) -> pd.DataFrame:
    """The workload at each pool configuration, on one warm pool (environments built
    before each run's clock starts)."""
    with tempfile.TemporaryDirectory() as folder:
        base = _scratch(config, folder, backend="pool", warm_up=True)
        with open_pool(base, max(c.workers for c in configurations),
                       max(c.replicas for c in configurations)) as pool:
            return pd.DataFrame([run_row(run(base.replace(pool=c, run_id=f"sweep-{k}"),
                                             pool=pool))
                                 for k, c in enumerate(configurations)])


# (variant, what it adds, whether the adapter keeps its environments, config changes)
LADDER = (
    ("00 official-like", "official-like path", False,
     dict(backend="sequential", observe="every_step", warm_up=False)),
    ("01 shared context", "reuse environment and renderer", True,
     dict(backend="sequential", observe="every_step", warm_up=True)),
    ("02 chunk boundary", "observe only at chunk boundaries", True,
     dict(backend="sequential", observe="chunk_boundary", warm_up=True)),
)


def runtime_ladder(config: ConfigLike, workers: int, replicas: int = 1) -> pd.DataFrame:
    """Each runtime behaviour added in turn, with its gain over the previous rung.

    00 official-like: environment and renderer rebuilt every episode, an observation
    every step; 01 shared context: environment and renderer kept for the process's life
    (built before the clock); 02 chunk boundary: observations read only when the policy
    acts; 03 two pools: ``workers`` simulator processes sharing ``replicas`` policy
    replicas. Rung 00 rebuilds through the adapter's ``reuse_option`` (MetaWorld's
    ``reuse_context``, LIBERO's ``reuse_env``); an adapter without one is refused.
    """
    config, rows, frames = as_config(config), [], []
    option = config.benchmark_class.reuse_option
    if option is None:
        raise ValueError(f"{config.benchmark_class.name} cannot rebuild its environments per "
                         "episode (no reuse_option): the official-like rung cannot run")
    with tempfile.TemporaryDirectory() as folder:
        rungs = [*LADDER, ("03 two pools", f"{workers} workers, {replicas} replica(s)", True,
                           dict(backend="pool", warm_up=True,
                                pool=PoolConfig(workers, replicas)))]
        for k, (name, added, reuse, changes) in enumerate(rungs):
            options = {**config.benchmark_options, option: reuse}
            result = run(_scratch(config, folder, run_id=f"rung-{k}", benchmark_options=options,
                                  **changes))
            rows.append({"variant": name, "added": added, **run_row(result)})
            frames.append(result.results)
    return _ladder_table(rows, frames)


def ray_ladder(config: ConfigLike, shards: int, workers: int,
               cpus: float | None = None) -> pd.DataFrame:
    """The first source paper's multi-GPU ladder, in kind, on the Ray backend: each rung
    adds one thing and runs the same episodes.

    00 one shard: one shard of one worker and one replica, an observation every step;
    01 more shards: ``shards`` shards; 02 more workers: ``workers`` workers per shard;
    03 chunk boundary: cameras rendered only when the policy reads them. The actors
    start once (a warm :class:`~workbench.runtime.ray_backend.RayPool` of ``shards``
    shards of ``workers`` workers, each shard asking for ``cpus / shards`` CPUs;
    ``cpus``: the Ray cluster's CPUs by default) and every rung runs on its first
    shards and workers, so no rung pays for start-up the others don't. ``gain`` divides
    a rung's steps/s by the rung before's, ``speedup`` by rung 00's (all from the first
    episode handed out to the last result; ``setup_s`` is each rung's warm-up, and the
    table's ``attrs["pool_setup_s"]`` the actors' start); the agreement columns compare
    each rung's outcomes with rung 00's.
    """
    config = as_config(config)
    ray = ensure_ray(config.ray.address)
    cpus = cpus or ray.cluster_resources().get("CPU", 1.0)
    rungs = [("00 one shard", "one shard, one worker, every step", 1, 1, "every_step"),
             ("01 more shards", f"{shards} shards", shards, 1, "every_step"),
             ("02 more workers", f"{workers} workers per shard", shards, workers, "every_step"),
             ("03 chunk boundary", "observe only at chunk boundaries", shards, workers,
              "chunk_boundary")]
    rows, frames = [], []
    with tempfile.TemporaryDirectory() as folder:
        base = _scratch(config, folder, backend="ray", warm_up=True, pool=PoolConfig(workers, 1),
                        ray=replace(config.ray, shards=shards, cpus_per_shard=cpus / shards))
        with open_ray_pool(base) as pool:
            for k, (name, added, n, w, observe) in enumerate(rungs):
                result = run(base.replace(run_id=f"rung-{k}", observe=observe,
                                          pool=PoolConfig(w, 1),
                                          ray=replace(base.ray, shards=n)), pool=pool)
                rows.append({"variant": name, "added": added, "shards": n,
                             "workers_per_shard": w, **run_row(result)})
                frames.append(result.results)
    table = _ladder_table(rows, frames)
    table.attrs["pool_setup_s"] = pool.setup_s
    return table


def _ladder_table(rows: Sequence[dict], frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """A ladder's rungs with each one's gain over the rung before, its speedup over the
    first, and its outcome agreement with the first."""
    table = pd.DataFrame(rows)
    table["gain"] = table["steps_per_s"] / table["steps_per_s"].shift(1)
    table["speedup"] = table["steps_per_s"] / table["steps_per_s"].iloc[0]
    agree = [outcome_agreement(frames[0], f) for f in frames]
    table["success_agreement"] = [a["success_agreement"] for a in agree]
    table["terminal_agreement"] = [a["terminal_agreement"] for a in agree]
    return table


def outcome_agreement_table(config: ConfigLike, configurations: Sequence[PoolConfig]
                            ) -> pd.DataFrame:
    """Success and terminal-step agreement of pool configurations with the sequential
    backend on the same episodes (identity is expected for deterministic,
    batch-invariant policies; neural policies may differ through batched arithmetic)."""
    with tempfile.TemporaryDirectory() as folder:
        reference = run(_scratch(config, folder, backend="sequential", warm_up=True,
                                 run_id="reference"))
        rows = [{"configuration": "sequential", **run_row(reference)}]
        base = _scratch(config, folder, backend="pool", warm_up=True)
        with open_pool(base, max(c.workers for c in configurations),
                       max(c.replicas for c in configurations)) as pool:
            for k, pool_config in enumerate(configurations):
                result = run(base.replace(pool=pool_config, run_id=f"pool-{k}"), pool=pool)
                rows.append({"configuration": pool_config.label, **run_row(result),
                             **outcome_agreement(reference.results, result.results)})
    table = pd.DataFrame(rows)
    table.loc[0, ["success_agreement", "terminal_agreement"]] = 1.0
    table["speedup"] = table["steps_per_s"] / table["steps_per_s"].iloc[0]
    return table


def warm_span(result: EvalRun) -> tuple[int, float]:
    """``(steps, seconds)`` of a run's warm evaluation, over every episode it recorded.
    Probes of a runtime-invariant policy run episodes of the plan (they count, the
    search's ``counted``): the steps are then every recorded episode's and the seconds the
    search's plus the chosen configuration's; otherwise the probes' episodes are not the
    run's and the span is the evaluation after the search (``report.wall_s``)."""
    report, search = result.report, result.search
    if search is not None and search.counted:
        return int(result.results["steps"].sum()), report.wall_s + search.search_s
    return report.steps, report.wall_s


def search_table(config: ConfigLike) -> tuple[SearchResult, pd.DataFrame]:
    """Run ``config`` with its concurrency search on (``search.enabled``), then the chosen
    configuration on the workload; returns the search result and a one-row table of the
    chosen run, its time in parts that do not overlap: ``search_s`` (the probes),
    ``setup_s`` (the rest of the start-up: processes, model loads, warm-up), ``eval_s``
    (the episodes after the search) and ``e2e_s`` (the whole call).
    ``probe_episodes_recorded``: episodes the probes ran as the run's own, for a policy
    that declares ``runtime_invariant``; ``episodes`` and the rates count the episodes
    run after the search (0 when the probes ran the whole plan)."""
    with tempfile.TemporaryDirectory() as folder:
        result = run(_scratch(config, folder, backend="pool", run_id="searched",
                              search={"enabled": True}))
    search = result.search
    row = run_row(result) | {
        "search_s": search.search_s, "setup_s": max(result.report.setup_s - search.search_s, 0.0),
        "probe_episodes_recorded": int(search.probes["episodes"].sum()) if search.counted else 0}
    order = ["search_s", "setup_s", "eval_s", "e2e_s"]
    columns = [c for c in row if c not in order]
    at = columns.index("observations") + 1
    return result.search, pd.DataFrame([row])[columns[:at] + order + columns[at:]]


PROBE_COLUMNS = ("probe", "source", "label", "workers", "replicas", "max_batch", "wait_ms",
                 "episodes", "successes", "steps_per_s", "busy_cores", "peak_mem_gib")
"""The columns of :attr:`ProbeSession.table`, in order."""


class ProbeSession:
    """Probes by hand: the whole plan of ``config`` at exactly the pool configuration
    asked, one probe after another, on one warm pool; remembered in order.

    Every probe runs all of the plan's episodes (``config.episodes`` per task) with the
    concurrency search off, whatever ``config.search`` says, so the row it adds is the
    configuration asked for and nothing else. history: earlier probes to show beside
    the new ones (a search's probe table, say). The pool starts on the first probe,
    sized ``max_workers`` x ``max_replicas``, stays warm between probes and is released
    by :meth:`close_pool` (a later probe starts it again), by :meth:`close`, or when the
    interpreter exits (a notebook's kernel shut down).
    """

    def __init__(self, config: ConfigLike, max_workers: int, max_replicas: int,
                 history: pd.DataFrame | None = None) -> None:
        self.config = as_config(config).replace(search={"enabled": False})
        self.max_workers, self.max_replicas = max_workers, max_replicas
        self.rows: list[dict[str, Any]] = [] if history is None else [
            {**row, "source": row.get("source", "search")}
            for row in history.to_dict("records")]
        self._folder = tempfile.TemporaryDirectory()
        self._held: list[EvalPool] = []  # the warm pool, if any (shared with the finalizer)
        self._finalizer = weakref.finalize(self, _release, self._held, self._folder)

    @property
    def pool(self) -> EvalPool | None:
        """The warm pool, or None when none is running."""
        return self._held[0] if self._held else None

    @property
    def workload(self) -> str:
        """What one probe runs, in words: ``"the whole plan: 4 episodes (1 task x 4)"``."""
        tasks = self.config.task_names()
        n = len(tasks) * self.config.episodes
        return (f"the whole plan: {n} episode{'s' * (n != 1)} ({len(tasks)} "
                f"task{'s' * (len(tasks) != 1)} x {self.config.episodes}), search off")

    def probe(self, pool_config: PoolConfig) -> dict[str, Any]:
        """Run the whole plan once at ``pool_config``; returns the probe's row (also kept).

        Refuses a configuration beyond the session's ``max_workers`` x ``max_replicas``
        or with more replicas than workers."""
        if not isinstance(pool_config, PoolConfig):
            raise ValueError(f"probe: expected a PoolConfig; got {type(pool_config).__name__}")
        if pool_config.workers > self.max_workers or pool_config.replicas > self.max_replicas:
            raise ValueError(f"this session's pool holds at most {self.max_workers} workers and "
                             f"{self.max_replicas} replicas; got {pool_config.label}")
        if pool_config.replicas > pool_config.workers:
            raise ValueError(f"more replicas than workers leaves a replica without a worker; "
                             f"got {pool_config.label}")
        base = _scratch(self.config, self._folder.name, backend="pool", warm_up=True)
        if not self._held:
            self._held.append(open_pool(base, self.max_workers, self.max_replicas))
        result = run(base.replace(pool=pool_config, run_id=f"probe-{len(self.rows)}"),
                     pool=self._held[0])
        row = probe_row(len(self.rows), result.report) | {
            "source": "manual", "label": pool_config.label, "setup_s": result.report.setup_s}
        self.rows.append(row)
        return row

    @property
    def history(self) -> pd.DataFrame:
        """Every probe so far (the given history first), all columns."""
        return pd.DataFrame(self.rows)

    @property
    def table(self) -> pd.DataFrame:
        """:attr:`history` as shown: :data:`PROBE_COLUMNS`, one row per probe."""
        rows = [row | {"label": row.get("label") or PoolConfig(
                    int(row["workers"]), int(row["replicas"]), int(row["max_batch"])).label}
                for row in self.rows]
        return pd.DataFrame(rows).reindex(columns=list(PROBE_COLUMNS))

    def memory_bytes(self) -> int:
        """Memory the warm pool's processes hold now (PSS: shared pages counted once;
        :func:`~workbench.runtime.resources.memory_held`); 0 without a pool."""
        return memory_held(self.pool.pids()) if self.pool is not None else 0

    def close_pool(self) -> None:
        """Stop the warm pool's processes (a later probe starts a new pool)."""
        while self._held:
            self._held.pop().close()

    def close(self) -> None:
        """Stop the pool and remove the probes' scratch records."""
        self._finalizer()


def _release(held: list[EvalPool], folder: tempfile.TemporaryDirectory) -> None:
    while held:
        held.pop().close()
    folder.cleanup()
