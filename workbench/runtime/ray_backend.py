"""Beyond one machine: deterministic shards of a plan as Ray tasks, each on its own pool.

The driver freezes the plan in its records file, splits it with
:func:`~workbench.plan.shard_episodes` (so every episode's outcome depends only on its
identity, not on the shard or machine), claims each shard's episodes when it hands the
shard to Ray, and records the results as the shard returns them. A shard whose task
fails (its node died, say) has its episodes recorded as infrastructure errors; Ray
does not retry it (``max_retries=0``), so nothing is silently run twice.

Start a cluster the usual Ray way (``ray start --head`` on one machine,
``ray start --address=HEAD:6379`` on the others) and pass ``address="auto"``; with no
address a local Ray instance is started.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.config import EvalConfig
from workbench.plan import EpisodeSpec, plan_episodes, shard_episodes
from workbench.records.store import EpisodeResult, RecordStore


def run_shard(config: dict[str, Any], shard: list[EpisodeSpec]) -> list[dict[str, Any]]:
    """Run one shard's episodes on a local pool; returns one row per episode."""
    from workbench.runtime.parallel import adapter_factory, policy_factory
    from workbench.runtime.pool import EvalPool, PoolConfig

    cfg = EvalConfig(**config)
    pool_config = PoolConfig(cfg.workers, cfg.replicas, cfg.max_batch, cfg.max_wait_ms)
    make_adapter = adapter_factory(cfg.benchmark, suite=cfg.suite, seed=cfg.seed,
                                   image_size=cfg.image_size)
    with EvalPool(make_adapter, policy_factory(cfg.policy, **cfg.policy_options),
                  cfg.workers, cfg.replicas, device=cfg.device) as pool:
        pool.configure(pool_config)
        report = pool.run(shard)
    return report.rows


def evaluate_on_ray(config: EvalConfig, shards: int, address: str | None = None,
                    cpus_per_shard: float | None = None) -> pd.DataFrame:
    """Evaluate ``config``'s plan as ``shards`` Ray tasks; returns the per-episode records."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 ignore_reinit_error=True)
    adapter_tasks = config.tasks or _suite_tasks(config)
    plan = plan_episodes(config.benchmark, config.suite, adapter_tasks, config.episodes)
    store = RecordStore(Path(config.output_dir) / "records.sqlite")
    run_id = store.create_run(config.resolved_run_id() + f"-ray{shards}", plan, asdict(config),
                              policy=config.policy)
    store.recover(run_id)
    pending = set(store.pending(run_id))
    remote = ray.remote(num_cpus=cpus_per_shard or config.workers, max_retries=0)(run_shard)
    futures = {}
    for k in range(shards):
        shard = [s for s in shard_episodes(plan, shards, k) if s.episode_id in pending]
        if not shard:
            continue
        for spec in shard:
            store.claim(run_id, spec.episode_id, f"ray-shard-{k}")
        futures[remote.remote(asdict(config), shard)] = (k, shard)
    while futures:
        done, _ = ray.wait(list(futures), num_returns=1)
        k, shard = futures.pop(done[0])
        _record_shard(store, run_id, k, shard, done[0], ray)
    results = store.results(run_id)
    store.close()
    return results


def _record_shard(store: RecordStore, run_id: str, k: int, shard: list[EpisodeSpec],
                  ref: Any, ray: Any) -> None:
    try:
        rows = ray.get(ref)
    except Exception as exc:  # the task or its node failed: record, never retry
        message = f"ray shard {k} failed: {type(exc).__name__}: {str(exc)[:500]}"
        for spec in shard:
            store.finish(run_id, spec.episode_id,
                         EpisodeResult(False, None, 0, 0.0, "infrastructure", message))
        return
    fields = EpisodeResult.__dataclass_fields__
    for row in rows:
        store.finish(run_id, row["episode_id"], EpisodeResult(**{f: row[f] for f in fields}))
    missing = {s.episode_id for s in shard} - {r["episode_id"] for r in rows}
    for episode_id in sorted(missing):
        store.finish(run_id, episode_id, EpisodeResult(
            False, None, 0, 0.0, "infrastructure", f"ray shard {k} returned no result"))


def _suite_tasks(config: EvalConfig) -> list[str]:
    from workbench.benchmarks import TASK_LISTERS

    return TASK_LISTERS[config.benchmark](config.suite)


def wait_for_cluster(cpus: int, timeout_s: float = 60.0) -> None:
    """Block until the Ray cluster offers ``cpus`` CPUs (nodes joining), or raise."""
    import ray

    deadline = time.monotonic() + timeout_s
    while ray.cluster_resources().get("CPU", 0) < cpus:
        if time.monotonic() > deadline:
            raise TimeoutError(f"Ray cluster has {ray.cluster_resources().get('CPU', 0)} CPUs; "
                               f"waited {timeout_s:.0f} s for {cpus}")
        time.sleep(1.0)
