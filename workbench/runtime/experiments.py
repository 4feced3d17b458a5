"""Runtime experiments behind the notebooks: the pool sweep, the variant ladder, agreement.

Each returns a DataFrame whose rows mirror a table of the first source paper, measured
on this machine. All systems run the same episode list.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from workbench.benchmarks import make_benchmark
from workbench.plan import EpisodeSpec
from workbench.policies import make_policy
from workbench.records.store import RecordStore
from workbench.runtime.agreement import outcome_agreement
from workbench.runtime.episode import run_episode, warm_up
from workbench.runtime.parallel import adapter_factory, policy_factory
from workbench.runtime.pool import EvalPool, PoolConfig, RunReport
from workbench.runtime.sequential import evaluate_sequential

GIB = 1024 ** 3


@dataclass(frozen=True)
class Workload:
    """What every system evaluates: a benchmark suite, a policy and an episode list."""

    benchmark: str
    suite: str
    policy: str
    policy_options: dict
    plan: tuple[EpisodeSpec, ...]
    image_size: int = 224

    def adapter_factory(self, **extra: Any) -> Callable:
        return adapter_factory(self.benchmark, suite=self.suite, image_size=self.image_size,
                               **extra)

    def policy_factory(self) -> Callable:
        return policy_factory(self.policy, **self.policy_options)


def _store(name: str, plan: Sequence[EpisodeSpec]) -> RecordStore:
    store = RecordStore(Path(tempfile.mkdtemp()) / f"{name}.sqlite")
    store.create_run(name, plan, {})
    return store


def report_row(report: RunReport) -> dict[str, Any]:
    """One row of the sweep table from a pool run."""
    cfg = report.config
    return {"workers": cfg.workers, "replicas": cfg.replicas, "max_batch": cfg.max_batch,
            "episodes": len(report.rows), "successes": report.successes,
            "eval_s": round(report.wall_s, 2), "steps": report.steps,
            "steps_per_s": round(report.steps_per_s, 2), "cpu_cores": round(report.busy_cores, 2),
            "peak_mem_gib": round(report.peak_rss_bytes / GIB, 2)}


def sweep_pool(workload: Workload, configs: Sequence[PoolConfig]) -> pd.DataFrame:
    """Run the workload at each (workers, replicas) configuration on one warm pool."""
    max_w = max(c.workers for c in configs)
    max_r = max(c.replicas for c in configs)
    rows = []
    with EvalPool(workload.adapter_factory(), workload.policy_factory(), max_w, max_r) as pool:
        pool.warm_up(workload.plan)
        for config in configs:
            pool.configure(config)
            rows.append(report_row(pool.run(workload.plan)))
    return pd.DataFrame(rows)


def _sequential(workload: Workload, observe_every_step: bool,
                reuse_context: bool) -> dict[str, Any]:
    start = time.perf_counter()
    adapter = make_benchmark(workload.benchmark, suite=workload.suite,
                             image_size=workload.image_size, reuse_context=reuse_context)
    policy = make_policy(workload.policy, **workload.policy_options)
    from workbench.policies.base import LoadContext

    policy.load(LoadContext(adapter.protocol.name))
    if reuse_context:  # contexts kept for the process's life are built during setup
        warm_up(adapter, workload.plan, policy.capabilities.features)
    setup = time.perf_counter() - start
    t0, steps, observed, results = time.perf_counter(), 0, 0, []
    for spec in sorted(workload.plan):
        result, trace = run_episode(adapter, policy, spec, observe_every_step)
        steps += result.steps
        observed += result.steps if observe_every_step else len(trace.observed_steps)
        results.append({"episode_id": spec.episode_id, "success": result.success,
                        "terminal_step": result.terminal_step})
    wall = time.perf_counter() - t0
    adapter.close()
    return {"observations": observed, "setup_s": round(setup, 2), "wall_s": round(wall, 2),
            "steps": steps, "steps_per_s": round(steps / wall, 2),
            "_results": pd.DataFrame(results)}


def runtime_ladder(workload: Workload, workers: int, replicas: int = 1) -> pd.DataFrame:
    """Each runtime behaviour added in turn, with its gain over the previous rung.

    00 official-like: environment and renderer rebuilt every episode, render every step;
    01 shared context: environment and renderer kept for the process's life;
    02 chunk boundary: cameras rendered only when the policy reads them;
    03 two pools: ``workers`` simulator processes sharing ``replicas`` policy replicas.
    """
    rungs = [("00 official-like", "official-like path", dict(observe_every_step=True,
                                                               reuse_context=False)),
             ("01 shared context", "reuse environment and renderer",
              dict(observe_every_step=True, reuse_context=True)),
             ("02 chunk boundary", "observe only at chunk boundaries",
              dict(observe_every_step=False, reuse_context=True))]
    rows = [{"variant": name, "added": added, **_sequential(workload, **kw)}
            for name, added, kw in rungs]
    start = time.perf_counter()
    with EvalPool(workload.adapter_factory(), workload.policy_factory(), workers,
                  replicas) as pool:
        pool.warm_up(workload.plan)
        setup = time.perf_counter() - start
        pool.configure(PoolConfig(workers, replicas, max_batch=max(1, workers // replicas)))
        report = pool.run(workload.plan)
    rows.append({"variant": "03 two pools", "added": f"{workers} workers, {replicas} replica(s)",
                 "observations": sum(r["observed_steps"] for r in report.rows),
                 "setup_s": round(setup, 2), "wall_s": round(report.wall_s, 2),
                 "steps": report.steps, "steps_per_s": round(report.steps_per_s, 2),
                 "_results": pd.DataFrame(report.rows)})
    table = pd.DataFrame(rows)
    table["gain"] = (table["steps_per_s"] / table["steps_per_s"].shift(1)).round(2)
    table["speedup"] = (table["steps_per_s"] / table["steps_per_s"].iloc[0]).round(2)
    reference = table["_results"].iloc[0]
    agree = [outcome_agreement(reference, r) for r in table["_results"]]
    table["success_agreement"] = [a["success_agreement"] for a in agree]
    table["terminal_agreement"] = [a["terminal_agreement"] for a in agree]
    return table.drop(columns="_results")


def agreement_table(workload: Workload, configs: Sequence[PoolConfig]) -> pd.DataFrame:
    """Success and terminal-step agreement of pool configurations with the sequential
    evaluator on the same episodes (identity is expected for deterministic,
    batch-invariant policies; neural policies may differ through batched arithmetic)."""
    adapter = make_benchmark(workload.benchmark, suite=workload.suite,
                             image_size=workload.image_size)
    policy = make_policy(workload.policy, **workload.policy_options)
    warm_up(adapter, workload.plan, policy.capabilities.features)  # as the pool's workers do
    start = time.perf_counter()
    reference = evaluate_sequential(adapter, policy, workload.plan,
                                    _store("ref", workload.plan), "ref", progress=False)
    ref_wall = time.perf_counter() - start
    adapter.close()
    steps = int(reference["steps"].sum())
    rows = [{"configuration": "sequential", "successes": int(reference["success"].sum()),
             "eval_s": round(ref_wall, 2), "steps_per_s": round(steps / ref_wall, 2),
             "speedup": 1.0, "success_agreement": 1.0, "terminal_agreement": 1.0}]
    max_w, max_r = max(c.workers for c in configs), max(c.replicas for c in configs)
    with EvalPool(workload.adapter_factory(), workload.policy_factory(), max_w, max_r) as pool:
        pool.warm_up(workload.plan)
        for config in configs:
            pool.configure(config)
            report = pool.run(workload.plan)
            agree = outcome_agreement(reference, pd.DataFrame(report.rows))
            rows.append({"configuration": f"{config.workers}w/{config.replicas}r "
                                          f"b{config.max_batch}",
                         "successes": report.successes, "eval_s": round(report.wall_s, 2),
                         "steps_per_s": round(report.steps_per_s, 2),
                         "speedup": round(report.steps_per_s / rows[0]["steps_per_s"], 2),
                         "success_agreement": agree["success_agreement"],
                         "terminal_agreement": agree["terminal_agreement"]})
    return pd.DataFrame(rows)


def make_workload(suite: str, tasks: Sequence[str] | None, episodes: int, policy: str,
                  policy_options: dict | None = None, image_size: int = 224,
                  benchmark: str = "metaworld") -> Workload:
    """A workload over ``tasks`` of ``suite`` (all of them when None), episodes 0..N-1 each.

    >>> w = make_workload("MT10", ["reach-v3"], 2, "expert")
    >>> [s.episode_id for s in w.plan]
    ['metaworld/MT10/reach-v3/0000', 'metaworld/MT10/reach-v3/0001']
    """
    from workbench.benchmarks import TASK_LISTERS
    from workbench.plan import plan_episodes

    chosen = list(tasks) if tasks else TASK_LISTERS[benchmark](suite)
    plan = plan_episodes(benchmark, suite, chosen, episodes)
    return Workload(benchmark, suite, policy, dict(policy_options or {}), tuple(plan), image_size)


def search_table(workload: Workload, max_workers: int, max_replicas: int,
                 settings: Any = None) -> tuple[Any, pd.DataFrame]:
    """Run the concurrency search on a fresh pool, then the chosen configuration on the
    workload; returns the search result and a one-row table of the chosen run."""
    from workbench.runtime.search import SearchSettings, search_concurrency

    start = time.perf_counter()
    with EvalPool(workload.adapter_factory(), workload.policy_factory(), max_workers,
                  max_replicas) as pool:
        result = search_concurrency(pool, workload.plan, settings or SearchSettings())
        pool.configure(result.best)
        report = pool.run(workload.plan)
    row = report_row(report)
    row.update(search_s=round(result.search_s, 1), e2e_s=round(time.perf_counter() - start, 1))
    return result, pd.DataFrame([row])


class ProbeSession:
    """Short probes at chosen configurations on one warm pool, remembered in order.

    The pool starts on the first probe, sized to ``max_workers`` and ``max_replicas``,
    and stays warm until :meth:`close`.
    """

    def __init__(self, workload: Workload, max_workers: int, max_replicas: int) -> None:
        self.workload, self.max_workers, self.max_replicas = workload, max_workers, max_replicas
        self.pool: EvalPool | None = None
        self.rows: list[dict[str, Any]] = []

    def probe(self, config: PoolConfig) -> dict[str, Any]:
        """Run the workload once at ``config``; returns the probe's row (also kept)."""
        if self.pool is None:
            self.pool = EvalPool(self.workload.adapter_factory(), self.workload.policy_factory(),
                                 self.max_workers, self.max_replicas)
            self.pool.warm_up(self.workload.plan)
        self.pool.configure(config)
        row = {"probe": len(self.rows), **report_row(self.pool.run(self.workload.plan)),
               "wait_ms": config.max_wait_ms}
        self.rows.append(row)
        return row

    @property
    def history(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
