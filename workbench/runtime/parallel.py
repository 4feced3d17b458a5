"""Evaluate a plan with the two pools: the fast path behind ``runtime: pool`` configs."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import pandas as pd
from tqdm.auto import tqdm

from workbench.benchmarks import make_benchmark
from workbench.benchmarks.base import BenchmarkAdapter, check_compatibility
from workbench.plan import EpisodeSpec
from workbench.policies import make_policy
from workbench.policies.base import Policy
from workbench.records.store import RecordStore
from workbench.runtime.pool import EvalPool, PoolConfig, RunReport


def adapter_factory(benchmark: str, **options: Any) -> Callable[[], BenchmarkAdapter]:
    """A picklable factory that builds the adapter inside a worker process."""
    return functools.partial(make_benchmark, benchmark, **options)


def policy_factory(name: str, **options: Any) -> Callable[[], Policy]:
    """A picklable factory that builds the policy inside a replica process."""
    return functools.partial(make_policy, name, **options)


def evaluate_parallel(make_adapter: Callable[[], BenchmarkAdapter],
                      make_policy_: Callable[[], Policy], plan: Sequence[EpisodeSpec],
                      store: RecordStore, run_id: str, config: PoolConfig,
                      out_dir: str | None = None, video: str | int = "off",
                      device: str = "cpu", progress: bool = True,
                      pool: EvalPool | None = None) -> tuple[pd.DataFrame, RunReport]:
    """Run ``plan`` (frozen in ``store``) on a pool; returns the records and the run report.

    The policy is checked against the benchmark's protocol before any process starts.
    Pass a warm ``pool`` (after a search, say) to reuse its processes.
    """
    adapter = make_adapter()
    check_compatibility(adapter.protocol, make_policy_().capabilities)
    adapter.close()
    own = pool is None
    if own:
        pool = EvalPool(make_adapter, make_policy_, config.workers, config.replicas,
                        device=device, out_dir=out_dir)
    pool.out_dir = out_dir
    try:
        pool.configure(config)
        bar = tqdm(total=len(store.pending(run_id)), desc="episodes", unit="ep",
                   disable=not progress)
        wins = [0, 0]

        def tick(row: dict) -> None:
            wins[0] += bool(row["success"])
            wins[1] += 1
            bar.update(1)
            bar.set_postfix(success=f"{wins[0]}/{wins[1]}")

        report = pool.run(plan, store, run_id, video=video, on_result=tick)
        bar.close()
    finally:
        if own:
            pool.close()
    return store.results(run_id), report
