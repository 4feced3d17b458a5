"""Config in, records out: the one call behind ``workbench eval`` and the notebooks."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

from workbench.benchmarks import make_benchmark
from workbench.config import EvalConfig
from workbench.plan import plan_episodes, shard_episodes
from workbench.policies import make_policy
from workbench.records.store import RecordStore
from workbench.runtime.parallel import adapter_factory, evaluate_parallel, policy_factory
from workbench.runtime.pool import EvalPool, PoolConfig, RunReport
from workbench.runtime.search import SearchResult, search_concurrency
from workbench.runtime.sequential import evaluate_sequential


@dataclass(frozen=True)
class EvalRun:
    """Where a run's records live, its per-episode results, and (pool runtime) what the
    pool measured and what the concurrency search chose."""

    run_id: str
    records_path: Path
    output_dir: Path
    results: pd.DataFrame
    report: RunReport | None = None
    search: SearchResult | None = None


def evaluate(config: EvalConfig) -> EvalRun:
    """Plan, freeze and run ``config``; resumable by run id (finished episodes are kept)."""
    adapter = make_benchmark(config.benchmark, suite=config.suite, seed=config.seed,
                             image_size=config.image_size)
    policy = make_policy(config.policy, **config.policy_options)
    out = Path(config.output_dir)
    store = RecordStore(out / "records.sqlite")
    try:
        plan = shard_episodes(plan_episodes(config.benchmark, config.suite,
                                            config.tasks or adapter.tasks(), config.episodes),
                              config.shards, config.shard)
        run_id = store.create_run(config.resolved_run_id(), plan, asdict(config),
                                  policy=policy.name, diagnostic=policy.capabilities.privileged)
        store.recover(run_id)  # a crashed earlier attempt: record, never retry
        if config.runtime == "pool":  # (the adapter built no environment yet)
            return _evaluate_pool(config, plan, store, run_id, out)
        results = evaluate_sequential(adapter, policy, plan, store, run_id, str(out),
                                      config.video, progress=config.progress,
                                      device=config.device)
    finally:
        adapter.close()
        store.close()
    return EvalRun(run_id, out / "records.sqlite", out, results)


def _evaluate_pool(config: EvalConfig, plan: list, store: RecordStore, run_id: str,
                   out: Path) -> EvalRun:
    make_adapter = adapter_factory(config.benchmark, suite=config.suite, seed=config.seed,
                                   image_size=config.image_size)
    make_pol = policy_factory(config.policy, **config.policy_options)
    search = None
    if config.search:
        cores = psutil.cpu_count() or 1
        with EvalPool(make_adapter, make_pol, max_workers=min(2 * cores, 64),
                      max_replicas=max(1, min(cores, 8)), device=config.device,
                      out_dir=str(out)) as pool:
            search = search_concurrency(pool, plan)
            results, report = evaluate_parallel(make_adapter, make_pol, plan, store, run_id,
                                                search.best, str(out), config.video,
                                                config.device, config.progress, pool=pool)
    else:
        pool_config = PoolConfig(config.workers, config.replicas, config.max_batch,
                                 config.max_wait_ms)
        results, report = evaluate_parallel(make_adapter, make_pol, plan, store, run_id,
                                            pool_config, str(out), config.video, config.device,
                                            config.progress)
    return EvalRun(run_id, out / "records.sqlite", out, results, report, search)


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Per-task table: episodes, successes, success rate (infrastructure errors excluded),
    mean terminal step of successes, policy and infrastructure error counts.
    """
    df = results.copy()
    df["infra"] = df["error_kind"].eq("infrastructure")
    df["policy_err"] = df["error_kind"].eq("policy")
    scored = df[~df["infra"] & df["status"].eq("finished")]
    by_task = df.groupby("task").agg(episodes=("episode_id", "size"),
                                     policy_errors=("policy_err", "sum"),
                                     infra_errors=("infra", "sum"))
    scores = scored.groupby("task").agg(successes=("success", "sum"),
                                        scored=("success", "size"),
                                        mean_terminal_step=("terminal_step", "mean"))
    table = by_task.join(scores, how="left").fillna({"successes": 0, "scored": 0})
    table["success_rate"] = np.where(table["scored"] > 0,
                                     table["successes"] / table["scored"].clip(lower=1), np.nan)
    table = table.reset_index()[["task", "episodes", "successes", "success_rate",
                                 "mean_terminal_step", "policy_errors", "infra_errors"]]
    total = pd.DataFrame([{
        "task": "ALL", "episodes": int(table["episodes"].sum()),
        "successes": int(table["successes"].sum()),
        "success_rate": scored["success"].mean() if len(scored) else np.nan,
        "mean_terminal_step": scored["terminal_step"].mean(),
        "policy_errors": int(table["policy_errors"].sum()),
        "infra_errors": int(table["infra_errors"].sum())}])
    return pd.concat([table, total], ignore_index=True).astype(
        {"episodes": int, "successes": int, "policy_errors": int, "infra_errors": int})
