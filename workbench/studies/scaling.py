"""Scaling on this machine: steps/s and end-to-end time against the episode count, the
workers and the replicas, and the concurrency search's share of the whole call.

:func:`scaling_table` runs one workload (an :class:`~workbench.config.EvalConfig`) through
the runner at each point of three axes, every run a fresh call (processes started, models
loaded, environments built: ``e2e_s`` is what a user waits for; ``steps_per_s`` is the
warm rate, first episode handed out to last result):

- ``episodes``: each total episode count (split evenly over the config's tasks) at the
  fixed pool of ``cores`` workers and 1 replica, and with the search on: its
  ``search_s`` and ``search_share`` (the search's seconds over the whole call; where the
  policy is runtime-invariant its probes' episodes count as the run's, and the warm
  time and steps are the search's and the chosen configuration's together);
- ``workers``: each worker count at 1 replica, on the middle episode count;
- ``replicas``: each replica count at the largest worker count, on the same episodes.
"""

from __future__ import annotations

import math
import tempfile
from typing import Any, Sequence

import pandas as pd
import psutil

from workbench.config import PoolConfig, as_config
from workbench.runner import run
from workbench.studies.runtime import ConfigLike, _scratch, warm_span

COLUMNS = ("axis", "variant", "episodes", "workers", "replicas", "steps", "successes",
           "eval_s", "e2e_s", "steps_per_s", "e2e_steps_per_s", "search_s", "search_share",
           "chosen")


def per_task(total: int, tasks: int) -> int:
    """Episodes per task for about ``total`` episodes over ``tasks`` tasks (at least 1).

    >>> per_task(50, 10), per_task(10, 10), per_task(3, 10)
    (5, 1, 1)
    """
    return max(1, round(total / tasks))


def scaling_table(config: ConfigLike, episode_counts: Sequence[int],
                  workers: Sequence[int], replicas: Sequence[int],
                  search: dict[str, Any] | None = None, cores: int | None = None
                  ) -> pd.DataFrame:
    """The three axes of the module docstring, one row per run (:data:`COLUMNS`);
    ``search``: the search's settings (``SearchConfig`` fields) for the searched rows."""
    config, search_options = as_config(config), search
    cores = cores or psutil.cpu_count() or 1
    tasks = len(config.task_names())
    counts = sorted({int(n) for n in episode_counts})
    if not counts or not workers or not replicas:
        raise ValueError("scaling_table needs at least one episode count, worker count and "
                         "replica count")
    middle = counts[len(counts) // 2]
    rows: list[dict[str, Any]] = []
    frames: list[pd.DataFrame] = []
    with tempfile.TemporaryDirectory() as folder:
        def measure(axis: str, variant: str, total: int, pool: PoolConfig,
                    search: bool = False) -> None:
            run_id = f"{axis}-{variant}-{total}-{len(rows)}".replace(" ", "-")
            result = run(_scratch(config, folder, run_id=run_id, backend="pool",
                                  warm_up=True, pool=pool,
                                  episodes=per_task(total, tasks),
                                  search={**(search_options or {}), "enabled": search}))
            report, found = result.report, result.search
            search_s = found.search_s if found is not None else math.nan
            steps, eval_s = warm_span(result)
            rows.append({
                "axis": axis, "variant": variant, "episodes": len(result.results),
                "workers": report.pool.workers, "replicas": report.pool.replicas,
                "steps": steps, "successes": int(result.results["success"].sum()),
                "eval_s": eval_s, "e2e_s": result.e2e_s,
                "steps_per_s": steps / eval_s if steps else math.nan,
                "e2e_steps_per_s": steps / result.e2e_s,
                "search_s": search_s, "search_share": search_s / result.e2e_s,
                "chosen": report.pool.label if found is not None else ""})
            frames.append(result.results)

        fixed = PoolConfig(cores, 1, max_wait_ms=5.0)
        for total in counts:
            measure("episodes", "fixed", total, fixed)
            measure("episodes", "searched", total, fixed, search=True)
        for w in sorted(set(workers)):
            measure("workers", f"{w} workers", middle, PoolConfig(w, 1, max_wait_ms=5.0))
        most = max(workers)
        for r in sorted(set(replicas)):
            if r <= most:
                measure("replicas", f"{r} replicas", middle,
                        PoolConfig(most, r, max_wait_ms=5.0))
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table.attrs["results"] = frames  # each row's episode records, in row order
    return table


def two_host_row(config: ConfigLike, total: int, workers_per_shard: int,
                 reference: pd.DataFrame, folder: str, cpus: int = 2) -> dict[str, Any]:
    """The scaling table's ``ray hosts`` row: ``total`` episodes of ``config`` over two
    hosts in network namespaces (:mod:`workbench.studies.ray_hosts`), one shard of
    ``workers_per_shard`` workers per host, with its outcome agreement against
    ``reference`` (the same episodes run locally). ``e2e_s`` is the driver's whole call
    with the cluster already up; ``eval_s`` first claim to last result. Raises
    :class:`~workbench.studies.ray_hosts.HostsUnavailable` where the hosts cannot be
    made."""
    from workbench.runtime.agreement import outcome_agreement
    from workbench.studies.ray_hosts import run_on_two_hosts

    config = as_config(config)
    run_config = {**config.to_dict(), "episodes": per_task(total, len(config.task_names())),
                  "backend": "ray", "progress": False, "video": "off",
                  "pool": {"workers": workers_per_shard, "replicas": 1},
                  "ray": {"shards": 2, "cpus_per_shard": cpus}}
    for key in ("output_dir", "run_id"):
        run_config.pop(key, None)
    results, seconds = run_on_two_hosts(run_config, folder, cpus=cpus)
    eval_s = float(results["finished_at"].max() - results["claimed_at"].min())
    steps = int(results["steps"].sum())
    agree = outcome_agreement(reference, results)
    return {"axis": "ray hosts", "variant": f"2 hosts x {workers_per_shard} workers",
            "episodes": len(results), "workers": 2 * workers_per_shard, "replicas": 2,
            "steps": steps, "successes": int(results["success"].sum()), "eval_s": eval_s,
            "e2e_s": seconds, "steps_per_s": steps / eval_s, "e2e_steps_per_s": steps / seconds,
            "search_s": math.nan, "search_share": math.nan, "chosen": "",
            "hosts": int(results["worker"].str[:11].nunique()),
            "infrastructure_errors": int((results["error_kind"] == "infrastructure").sum()),
            **{k: v for k, v in agree.items() if k.endswith("_agreement")}}
