"""Concurrency search: size the worker and replica pools from short measured probes.

The first source paper states its rules in a table whose formulas were partly lost in
extraction; this is the reading implemented here, rule by rule (the paper's words in
quotes).

- **A probe** runs a fixed list of probe episodes at one (workers, replicas) pair on a
  warm pool and measures steps/s, busy cores, the busiest device's peak memory (each
  GPU's replicas' peak reserved memory; on a CPU machine the pool's peak resident
  memory), each replica's peak, GPU utilisation, and success.
- **A probe fails** when "a worker is missing or fails, an out-of-memory error occurs,
  episodes do not finish within" ``probe_time_limit_s``, "or success on the episodes
  shared with the first probe falls below" ``success_fraction`` "times the first
  probe's" (probes whose episodes do not count may stop each episode at
  ``probe_max_steps``: success then means success within that many steps, the same cap
  in every probe). An out-of-memory error inside a replica is recorded as the policy's error
  of its episode (whatever the policy's code raises is), and the probe that hit one
  fails: it packed too many replicas or workers on the device.
  The search keeps the incumbent and stops at the first failed probe.
- **Worker cap**: ``W_cap = min(64, floor(cores / c))``, "where c is the CPU cost per
  worker fitted from the probes with the fewest and most workers at" one replica
  count (the first probe's): ``c = (busy(W_max) - busy(W_min)) / (W_max - W_min)``;
  "before two such probes, c = 1"; "at most 64".
- **Replica cap** (``ReplicaCap``): per device ``floor((M_d - reserve) / m_r)``, summed
  over the devices replicas are placed on, "with m_r measured by the first probe" (the
  largest replica's peak during that probe, not its size right after loading), and the
  reserve ("GiB reserved per GPU") subtracted from every device, not once.
- **Feasibility**: a configuration is probed only if "the busiest GPU's peak memory,
  extrapolated from the incumbent with the replica footprint and the fitted memory per
  worker, stays below" its capacity less the reserve. Replicas and workers are placed
  round robin over the devices, so the busiest device holds ``ceil(R / D)`` replicas
  and ``ceil(W / D)`` workers' share: ``P' = P_inc + (ceil(R'/D) - ceil(R/D)) * m_r +
  (ceil(W'/D) - ceil(W/D)) * m_w``. The memory per worker ``m_w`` is fitted like ``c``
  (peak memory against workers, fewest and most workers at one replica count); before
  two such probes it is the first probe's peak less its replicas, per worker. On a
  machine without a GPU the one device is the host: its capacity is the memory
  available when the search starts plus what the pool already holds.
- **Growth** (the order is ours; the paper's text does not fix it): workers step along
  ``worker_candidates`` while steps/s improves by more than ``min_gain``; each new
  worker count starts at the incumbent's replica count, and replicas then grow one at a
  time while they help, up to the replica cap and the worker count. The search stops at
  the first worker count that does not beat the incumbent, exceeds a cap, is infeasible,
  or fails.

Workers and replicas start lazily (:meth:`~workbench.runtime.pool.EvalPool.grow`) as the
search reaches configurations that need them, never all at once: only the second probe's
workers start with the first (:func:`workers_to_start`), side by side, and sit idle
during it (a probe measures only the processes its configuration uses). The rules
themselves (:class:`SearchRules`, :func:`run_rules`) see only probe rows, so they are
tested on synthetic probe tables as well as on real probes.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pandas as pd
import psutil

from workbench.config import PoolConfig, SearchConfig
from workbench.contracts.plan import EpisodeSpec
from workbench.runtime.episode import EpisodeOptions
from workbench.runtime.pool import EvalPool, mean_steps_per_task
from workbench.runtime.sink import RecordSink, RunReport

GIB = 1024 ** 3


@dataclass(frozen=True)
class SearchRules:
    """What the rules know of the machine and the search's settings.

    device_bytes: memory of each device replicas are placed on (each GPU's total; on a
    machine without a GPU one entry, the host memory the pool may use).
    """

    cores: int
    device_bytes: tuple[float, ...]
    reserve_bytes: float = 1.0 * GIB
    max_workers: int = 64
    max_replicas: int = 8
    worker_candidates: tuple[int, ...] = SearchConfig.worker_candidates
    min_gain: float = 0.03

    @property
    def devices(self) -> int:
        return len(self.device_bytes)


@dataclass
class SearchResult:
    """The chosen configuration, every probe, what the search cost, and why it stopped.

    decisions: one line per step of the search (what was probed or skipped and why),
    ending with the reason it stopped.
    """

    best: PoolConfig
    probes: pd.DataFrame
    search_s: float
    cost_per_worker: float
    worker_cap: int
    replica_cap: int
    memory_per_worker_gib: float = math.nan
    replica_footprint_gib: float = math.nan
    decisions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    task_steps: dict[str, float] = field(default_factory=dict)
    """Mean steps per task of the probes' episodes (for tail-aware dispatch)."""
    counted: bool = False
    """Whether the probes' episodes were recorded as the run's."""
    shard: int | None = None
    """The Ray shard this search ran for (None: the whole local pool)."""


# -- the rules, on probe rows ---------------------------------------------------------------
def _fit(rows: Sequence[dict], key: str) -> float | None:
    """Slope of ``key`` against workers between the ok probes with the fewest and the
    most workers at the first probe's replica count; None before two such probes."""
    if not rows:
        return None
    at = rows[0]["replicas"]
    same = sorted((r["workers"], r[key]) for r in rows
                  if r["status"] == "ok" and r["replicas"] == at)
    if len(same) < 2 or same[-1][0] == same[0][0]:
        return None
    (w0, v0), (w1, v1) = same[0], same[-1]
    return (v1 - v0) / (w1 - w0)


def cost_per_worker(rows: Sequence[dict]) -> float:
    """CPU cores one worker keeps busy, fitted from the probes (1 before two of them).

    >>> rows = [dict(workers=1, replicas=1, status="ok", busy_cores=1.2),
    ...         dict(workers=3, replicas=1, status="ok", busy_cores=2.4)]
    >>> cost_per_worker(rows[:1]), cost_per_worker(rows)
    (1.0, 0.6)
    """
    slope = _fit(rows, "busy_cores")
    return 1.0 if slope is None else round(max(slope, 0.05), 6)


def worker_cap(rules: SearchRules, cost: float) -> int:
    """``min(64, floor(cores / c))``, and no more than the search may start.

    >>> worker_cap(SearchRules(cores=8, device_bytes=(1,)), 0.6)
    13
    """
    return max(1, min(64, rules.max_workers, math.floor(rules.cores / max(cost, 1e-6))))


def replica_footprint(rows: Sequence[dict]) -> float:
    """The largest replica's peak memory during the first probe (bytes)."""
    return float(rows[0]["replica_peak_bytes"]) if rows else math.nan


def replica_cap(rules: SearchRules, footprint: float) -> int:
    """Replicas that fit: ``floor((M_d - reserve) / footprint)`` summed over devices.

    >>> replica_cap(SearchRules(cores=8, device_bytes=(24 * GIB, 24 * GIB),
    ...                         reserve_bytes=2 * GIB), 5 * GIB)
    8
    """
    if not footprint > 0:
        return max(1, min(rules.max_replicas, rules.devices))
    fits = sum(max(0, math.floor((m - rules.reserve_bytes) / footprint))
               for m in rules.device_bytes)
    return max(1, min(rules.max_replicas, fits))


def memory_per_worker(rows: Sequence[dict], rules: SearchRules) -> float:
    """Peak memory one worker adds to the busiest device (bytes), fitted from the probes;
    before two of them, the first probe's peak less its replicas, per worker."""
    slope = _fit(rows, "device_peak_bytes")
    if slope is not None:
        return max(slope, 0.0)
    first = rows[0]
    on_busiest = math.ceil(first["replicas"] / rules.devices)
    share = math.ceil(first["workers"] / rules.devices)
    return max(first["device_peak_bytes"] - on_busiest * replica_footprint(rows), 0.0) / share


def predicted_peak(rules: SearchRules, incumbent: dict, workers: int, replicas: int,
                   footprint: float, per_worker: float) -> float:
    """The busiest device's peak at (workers, replicas), extrapolated from ``incumbent``.

    >>> rules = SearchRules(cores=8, device_bytes=(24 * GIB,))
    >>> incumbent = dict(workers=4, replicas=1, device_peak_bytes=10 * GIB)
    >>> predicted_peak(rules, incumbent, 6, 2, 5 * GIB, 0.5 * GIB) / GIB
    16.0
    """
    d = rules.devices
    return (incumbent["device_peak_bytes"]
            + (math.ceil(replicas / d) - math.ceil(incumbent["replicas"] / d)) * footprint
            + (math.ceil(workers / d) - math.ceil(incumbent["workers"] / d)) * per_worker)


def _limit(rules: SearchRules) -> float:
    """What the busiest device may hold: the smallest device's capacity less the reserve."""
    return min(rules.device_bytes) - rules.reserve_bytes


class _Stop(Exception):
    pass


@dataclass
class _Search:
    rules: SearchRules
    measure: Callable[[int, int], dict]
    rows: list[dict] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    best: tuple[int, int] = (1, 1)
    best_row: dict | None = None

    def probe(self, workers: int, replicas: int, why: str) -> dict:
        row = dict(self.measure(workers, replicas))
        if row.get("status") == "exhausted":  # nothing left to probe with: not a failure
            raise _Stop(f"{row['reason']} at {workers} workers, {replicas} replicas")
        row.setdefault("probe", len(self.rows))
        self.rows.append(row)
        outcome = (f"{row['steps_per_s']:.2f} steps/s" if row["status"] == "ok"
                   else f"failed: {row['reason']}")
        self.decisions.append(f"probe {len(self.rows) - 1}: {workers} workers, {replicas} "
                              f"replicas ({why}): {outcome}")
        return row

    def feasible(self, incumbent: dict, workers: int, replicas: int) -> bool:
        rules = self.rules
        footprint = replica_footprint(self.rows)
        per_worker = memory_per_worker(self.rows, rules)
        peak = predicted_peak(rules, incumbent, workers, replicas, footprint, per_worker)
        if peak < _limit(rules):
            return True
        self.decisions.append(
            f"skip {workers} workers, {replicas} replicas: the busiest device's peak would "
            f"be {peak / GIB:.2f} GiB (replica {footprint / GIB:.2f} GiB, worker "
            f"{per_worker / GIB:.2f} GiB), over {_limit(rules) / GIB:.2f} GiB "
            f"({min(rules.device_bytes) / GIB:.2f} GiB less the {rules.reserve_bytes / GIB:.2f}"
            " GiB reserve)")
        return False

    def gain(self, rate: float, over: float) -> bool:
        return rate > over * (1 + self.rules.min_gain)

    def run(self) -> None:
        first = self.probe(1, 1, "first probe")
        if first["status"] != "ok":
            raise _Stop("the first probe failed; 1 worker and 1 replica are the fallback")
        self.best_row, rate_best = first, first["steps_per_s"]
        for workers in (w for w in self.rules.worker_candidates if w > 1):
            cap = worker_cap(self.rules, cost_per_worker(self.rows))
            if workers > cap:
                raise _Stop(f"{workers} workers exceed the worker cap {cap} "
                            f"(c = {cost_per_worker(self.rows):.2f} cores per worker)")
            replicas = min(self.best[1], workers)
            if not self.feasible(self.best_row, workers, replicas):
                raise _Stop("the next worker count does not fit in memory")
            row = self.probe(workers, replicas, "more workers")
            if row["status"] != "ok":
                raise _Stop(f"the probe at {workers} workers failed; the incumbent stays")
            r_cap = replica_cap(self.rules, replica_footprint(self.rows))
            while replicas < min(r_cap, workers):
                if not self.feasible(row, workers, replicas + 1):
                    break
                more = self.probe(workers, replicas + 1, "more replicas")
                if more["status"] != "ok" or not self.gain(more["steps_per_s"],
                                                            row["steps_per_s"]):
                    break
                row, replicas = more, replicas + 1
            if not self.gain(row["steps_per_s"], rate_best):
                raise _Stop(f"{workers} workers gain less than {self.rules.min_gain:.0%} "
                            "over the incumbent")
            self.best, self.best_row, rate_best = (workers, replicas), row, row["steps_per_s"]
        raise _Stop("no worker count left to try")


def run_rules(rules: SearchRules, measure: Callable[[int, int], dict]) -> SearchResult:
    """Apply the rules with ``measure(workers, replicas)`` returning each probe's row
    (keys: workers, replicas, status, reason, steps_per_s, busy_cores,
    device_peak_bytes, replica_peak_bytes); returns the choice, the rows and why."""
    start = time.perf_counter()
    search = _Search(rules, measure)
    try:
        search.run()
    except _Stop as stop:
        search.decisions.append(f"stop: {stop}; chosen: {search.best[0]} workers, "
                                f"{search.best[1]} replicas")
    rows = search.rows
    footprint = replica_footprint(rows)
    return SearchResult(
        PoolConfig(*search.best), pd.DataFrame(rows), time.perf_counter() - start,
        cost_per_worker(rows), worker_cap(rules, cost_per_worker(rows)),
        replica_cap(rules, footprint),
        memory_per_worker(rows, rules) / GIB if rows else math.nan,
        footprint / GIB, search.decisions)


# -- probes on a real pool ------------------------------------------------------------------
def probe_plan(plan: Sequence[EpisodeSpec], episodes: int) -> list[EpisodeSpec]:
    """The probe episodes: one per task first, round robin, so probes span tasks.

    >>> from workbench.contracts.plan import plan_episodes
    >>> [s.task for s in probe_plan(plan_episodes("m", "s", ["a", "b"], 3), 3)]
    ['a', 'b', 'a']
    """
    by_task: dict[str, list[EpisodeSpec]] = {}
    for spec in sorted(plan):
        by_task.setdefault(spec.task, []).append(spec)
    rounds = max(len(v) for v in by_task.values())
    ordered = [v[i] for i in range(rounds) for v in by_task.values() if i < len(v)]
    return ordered[:episodes]


def probe_row(index: int, report: RunReport) -> dict:
    """One row of a probe table: the configuration and what it measured."""
    cfg = report.pool
    stats = report.replica_stats
    gpu = [s for s in stats if s.device.startswith("cuda")]
    by_device: dict[str, int] = {}
    for s in gpu:
        by_device[s.device] = by_device.get(s.device, 0) + s.gpu_peak_bytes
    device_peak = max(by_device.values()) if gpu else report.peak_rss_bytes
    replica_peak = max((s.gpu_peak_bytes if gpu else s.peak_rss_bytes for s in stats),
                       default=0)
    return {"probe": index, "workers": cfg.workers, "replicas": cfg.replicas,
            "max_batch": cfg.batch, "wait_ms": cfg.max_wait_ms, "episodes": len(report.rows),
            "successes": report.successes, "steps": report.steps, "wall_s": report.wall_s,
            "steps_per_s": report.steps_per_s, "busy_cores": report.busy_cores,
            "peak_mem_gib": report.peak_rss_bytes / GIB,
            "device_peak_bytes": device_peak, "replica_peak_bytes": replica_peak,
            "gpu_util_pct": report.gpu_util_pct, "gpu_peak_gib":
                max(by_device.values()) / GIB if gpu else math.nan,
            "status": "ok", "reason": ""}


OUT_OF_MEMORY = re.compile(r"out of memory|OutOfMemoryError|MemoryError")
"""How an episode's error message says memory ran out (the host's or CUDA's)."""


def _failure(report: RunReport, first: RunReport | None, settings: SearchConfig) -> str:
    if report.failures:
        return "; ".join(report.failures)
    infra = [r for r in report.rows if r["error_kind"] == "infrastructure"]
    if any(OUT_OF_MEMORY.search(str(r.get("error_message") or "")) for r in report.rows
           if r["error_kind"] is not None):
        return "out of memory"
    if infra:
        return "an episode hit an infrastructure error"
    if psutil.virtual_memory().available < settings.memory_reserve_gib * GIB:
        return "memory ran out"
    if first is not None:
        base = {r["episode_id"]: bool(r["success"]) for r in first.rows}
        shared = [r for r in report.rows if r["episode_id"] in base]
        ref = sum(base[r["episode_id"]] for r in shared)
        got = sum(bool(r["success"]) for r in shared)
        if ref and got < settings.success_fraction * ref:
            return f"success on shared episodes {got}/{ref} below {settings.success_fraction:.0%}"
    return ""


def workers_to_start(settings: SearchConfig, cores: int) -> int:
    """Workers a searched pool starts with: those of the second probe (the next worker
    candidate after 1, which the rules probe unless the first probe fails, the cap of
    ``cores`` before two probes excludes it, or it does not fit in memory), so that they
    start and build their environments side by side instead of one after the other.

    >>> workers_to_start(SearchConfig(), 2), workers_to_start(SearchConfig(), 1)
    (2, 1)
    >>> workers_to_start(SearchConfig(worker_candidates=(1, 4, 8)), 16)
    4
    """
    limit = settings.pool_limits(cores)[0]
    after = [w for w in settings.worker_candidates if w > 1]
    return max(1, min(min(after, default=1), limit, cores))


def search_pool(parts: Any, settings: SearchConfig, cores: int) -> EvalPool:
    """A pool for the search on ``cores`` cores: one replica and the second probe's
    workers (:func:`workers_to_start`), grown by the search up to its limits."""
    return EvalPool(parts, workers_to_start(settings, cores), 1,
                    limits=settings.pool_limits(cores))


def machine_rules(pool: EvalPool, settings: SearchConfig, cores: int | None = None) -> SearchRules:
    """The rules' view of this machine: the GPUs the replicas use (each one's total
    memory), or the host (memory available now plus what the pool holds)."""
    cores = cores or psutil.cpu_count() or 1
    max_workers, max_replicas = pool.limits
    if pool.parts.device.startswith("cuda"):
        import torch

        count = max(torch.cuda.device_count(), 1)
        devices = tuple(float(torch.cuda.get_device_properties(i).total_memory)
                        for i in range(min(count, max_replicas)))
    else:
        held = sum(psutil.Process(pid).memory_info().rss for pid in pool.pids())
        devices = (float(psutil.virtual_memory().available + held),)
    return SearchRules(cores, devices, settings.memory_reserve_gib * GIB, max_workers,
                       max_replicas, tuple(settings.worker_candidates), settings.min_gain)


@dataclass(frozen=True)
class CountedProbes:
    """Where probe episodes are recorded when they count as the run's: a sink factory
    over the run's records (a fresh sink per probe, so each probe's rows are its own),
    the run's episode options and the episodes it films."""

    sink: Callable[[], RecordSink]
    options: EpisodeOptions
    videos: frozenset[str] = frozenset()


def search_concurrency(pool: EvalPool, plan: Sequence[EpisodeSpec],
                       settings: SearchConfig = SearchConfig(), max_wait_ms: float = 5.0,
                       cores: int | None = None, max_steps: int | None = None,
                       counted: CountedProbes | None = None) -> SearchResult:
    """Probe (workers, replicas) pairs on ``pool``, growing it as the rules reach larger
    configurations, and return the best, every probe and the search's decisions.

    Probes batch at the derived batch size (``PoolConfig.batch``) and wait at most
    ``max_wait_ms``; the chosen configuration does the same. ``max_steps`` caps each
    probe episode as the run caps its own; a probe whose episodes do not count stops each
    at ``settings.probe_max_steps`` too, when that is lower.

    Which episodes probes run: with ``counted`` (given for a policy that declares
    ``runtime_invariant``), each probe claims the next pending episodes of ``plan`` and
    records them as the run's, like any others, so the search adds little to the run's
    time; the success rule has no shared episodes to compare then, and needs none (the
    policy's outcomes cannot depend on the configuration). Otherwise every probe runs
    the same episodes of ``plan`` (one per task first) and their results are discarded:
    the run itself runs and records every episode. (Episodes outside the plan, later
    indices of its tasks, would not exist for benchmarks with a fixed set of initial
    states, such as LIBERO's 50 per task, when the plan uses them all.)"""
    start = time.perf_counter()
    rules = machine_rules(pool, settings, cores)
    fixed = probe_plan(plan, max(settings.probe_episodes, 2 * rules.max_workers))
    reports: list[RunReport] = []
    cut = [m for m in (max_steps, settings.probe_max_steps) if m is not None]
    options = EpisodeOptions(pool.observe_every_step, "probe", max_steps=min(cut, default=None))

    def measure(workers: int, replicas: int) -> dict:
        pool.configure(PoolConfig(workers, replicas, max_wait_ms=max_wait_ms),
                       pool.observe_every_step)
        count = max(settings.probe_episodes, 2 * workers)
        if counted is None:
            # the probe's environments, outside the clock (a worker builds each task once;
            # those no probe runs are built by the run, whose clock counts them anyway)
            pool.warm_up(fixed[:count])
            report = pool.run(fixed[:count], options=options,
                              time_limit_s=settings.probe_time_limit_s)
        else:
            sink = counted.sink()
            pending = sink.pending(plan)
            episodes = probe_plan(pending, count) if pending else []
            if not episodes:
                return {"status": "exhausted",
                        "reason": "every episode of the plan has run (in probes)"}
            pool.warm_up(episodes)
            report = pool.run(episodes, sink, counted.options, counted.videos,
                              time_limit_s=settings.probe_time_limit_s)
            sink.close()
        row = probe_row(len(reports), report) | {"counted": counted is not None}
        reason = _failure(report, None if counted else (reports[0] if reports else None),
                          settings)
        if reason:
            row["status"], row["reason"] = "failed", reason
        reports.append(report)
        return row

    result = run_rules(rules, measure)
    result.counted = counted is not None
    result.notes.append(
        f"probes ran {sum(len(r.rows) for r in reports)} episodes of the plan and recorded "
        "them as the run's (the policy declares runtime_invariant)" if counted else
        f"probes re-ran episodes of the plan ({len(fixed)} distinct) and discarded their "
        "results; the run ran and recorded every episode itself")
    result.decisions.insert(0, result.notes[-1])
    result.search_s = time.perf_counter() - start
    result.task_steps = mean_steps_per_task(
        [row for report in reports for row in report.rows])
    return result


def format_search(result: SearchResult) -> str:
    """The search's work as text: its decisions, the probe table and the choice."""
    columns = ["probe", "workers", "replicas", "max_batch", "episodes", "successes",
               "steps_per_s", "busy_cores", "peak_mem_gib", "gpu_util_pct", "gpu_peak_gib",
               "status", "reason"]
    table = result.probes[[c for c in columns if c in result.probes.columns]]
    return "\n".join([
        "concurrency search" + (f" of ray shard {result.shard}:" if result.shard is not None
                                else ":"),
        *(f"  {line}" for line in result.decisions),
        table.to_string(index=False, float_format=lambda v: f"{v:.2f}"),
        f"chosen: {result.best.workers} workers, {result.best.replicas} replicas, batch "
        f"{result.best.batch}, after {result.search_s:.1f} s of probes "
        f"(c = {result.cost_per_worker:.2f} cores per worker, worker cap "
        f"{result.worker_cap}, replica cap {result.replica_cap})"])


def as_dict(result: SearchResult) -> dict[str, Any]:
    """The search as plain data, for a run's records and reports."""
    return {"best": {"workers": result.best.workers, "replicas": result.best.replicas,
                     "max_batch": result.best.batch, "max_wait_ms": result.best.max_wait_ms},
            "search_s": result.search_s, "cost_per_worker": result.cost_per_worker,
            "worker_cap": result.worker_cap, "replica_cap": result.replica_cap,
            "memory_per_worker_gib": result.memory_per_worker_gib,
            "replica_footprint_gib": result.replica_footprint_gib,
            "decisions": list(result.decisions), "counted": result.counted,
            "shard": result.shard,
            "probes": result.probes.astype(object).where(result.probes.notna(), None)
            .to_dict("records")}
