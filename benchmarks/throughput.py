"""Throughput on MetaWorld MT10, side by side in one run: sequential, workbench, vla-eval.

Workload: the scripted expert wrapped to pay the vision policy's full cost
(``expert-vision-cost``: both cameras at 224x224 and the default render quality, the
VisionPolicy network run at every chunk boundary, chunks of 8), so episodes end by
success as in a real evaluation. Every system runs the same episode list.

Systems (the workbench's through its runner, ``workbench.run``):
- sequential: the official-like loop (an observation rendered at every step);
- workbench fixed: two pools at a fixed configuration (workers = cores, 1 replica),
  environments built lazily as an evaluation from cold would;
- workbench search: the concurrency search, then the chosen configuration;
- vla-eval: ``vla-eval run --no-docker`` shards against its batching model server
  (chunked, same network cost), tuned over shards, max batch and wait on a probe
  list, best configuration then run on the full list.

Also measured: this machine's limit (cores / CPU seconds per step in one pinned
process with chunk-boundary observation).

    python benchmarks/throughput.py [--quick] [--episodes N] [--tasks K]

Prints a table and, last, one JSON line with speedup_vs_sequential,
speedup_vs_vla_eval, efficiency_vs_limit, e2e_speedup_vs_sequential,
success_agreement and terminal_agreement.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402
import psutil  # noqa: E402

import workbench  # noqa: E402
from workbench.config import EvalConfig, PoolConfig  # noqa: E402
from workbench.contracts import use_headless_rendering  # noqa: E402
from workbench.runtime.agreement import outcome_agreement  # noqa: E402
from workbench.runtime.job import build_components  # noqa: E402
from workbench.runtime.limits import measure_step_cost  # noqa: E402

POLICY = ("expert-vision-cost", {"chunk_size": 8})


def workload(n_tasks: int, episodes: int) -> EvalConfig:
    """The first ``n_tasks`` MT10 tasks with the vision-cost expert at 224 px; records go to
    a scratch folder."""
    config = workbench.load_config(dict(
        benchmark="metaworld", suite="MT10", episodes=episodes, policy=POLICY[0],
        policy_options=POLICY[1], image_size=224, progress=False,
        output_dir=tempfile.mkdtemp(prefix="throughput-")))
    return config.replace(tasks=config.task_names()[:n_tasks])


def run_sequential(config: EvalConfig) -> dict:
    # environments built before the clock, as the pools' workers (and the search) build theirs
    result = workbench.run(config.replace(backend="sequential", warm_up=True, run_id="seq"))
    return _row("sequential", result.results, result.report.wall_s, result.e2e_s)


def run_pool(config: EvalConfig, pool: PoolConfig | None, cores: int) -> tuple[dict, pd.DataFrame]:
    if pool is None:
        result = workbench.run(config.replace(backend="pool", run_id="search", search={
            "enabled": True, "max_workers": 2 * cores, "max_replicas": 2}))
        probes, search_s, name = result.search.probes, result.search.search_s, "workbench search"
    else:  # environments are built lazily, as an evaluation from cold would
        result = workbench.run(config.replace(backend="pool", pool=pool, run_id="fixed"))
        probes, search_s, name = pd.DataFrame(), 0.0, "workbench fixed"
    report = result.report
    row = _row(name, result.results, report.wall_s, result.e2e_s)
    row.update(config=report.pool.label, busy_cores=report.busy_cores, search_s=search_s,
               peak_mem_gib=report.peak_rss_bytes / 1024 ** 3)
    return row, probes


def run_vla_eval_tuned(plan: list, probe_episodes: int, grid: list[tuple[int, int, float]]
                       ) -> tuple[dict, pd.DataFrame]:
    from vla_eval_metaworld import run_vla_eval

    tasks = sorted({s.task for s in plan})
    episodes = max(s.episode_index for s in plan) + 1
    common = dict(extra_cost_factory="vla_eval_expert_server:make_workbench_vision_cost",
                  extra_cost_kwargs={"chunk_size": POLICY[1]["chunk_size"], "num_threads": 1},
                  chunk_size=POLICY[1]["chunk_size"], keep_output=False)
    tuning = []
    probe_tasks = tasks[:probe_episodes]
    for shards, batch, wait_ms in grid:
        df = run_vla_eval(probe_tasks, 1, batch, wait_ms, shards, **common)
        tuning.append({"shards": shards, "max_batch": batch, "wait_ms": wait_ms,
                       "steps": int(df["steps"].sum()), "steps_per_s": _vla_rate(df)})
    table = pd.DataFrame(tuning)
    best = table.sort_values("steps_per_s", ascending=False).iloc[0]
    start = time.perf_counter()
    df = run_vla_eval(tasks, episodes, int(best["max_batch"]), float(best["wait_ms"]),
                      int(best["shards"]), **common)
    e2e = time.perf_counter() - start
    eval_s = float(df["t_end"].max() - df["t_start"].min())
    df = df.assign(episode_id=[f"metaworld/MT10/{t}/{int(e):04d}"
                               for t, e in zip(df["task"], df["episode"])])
    row = _row("vla-eval tuned", df, eval_s, e2e)
    row["config"] = f"{int(best['shards'])} shards b{int(best['max_batch'])} w{best['wait_ms']:g}ms"
    return row, table


def _vla_rate(df: pd.DataFrame) -> float:
    span = float(df["t_end"].max() - df["t_start"].min())
    return round(float(df["steps"].sum()) / span, 2) if span > 0 else 0.0


def _row(name: str, df: pd.DataFrame, eval_s: float, e2e_s: float) -> dict:
    steps = int(df["steps"].sum())
    return {"system": name, "episodes": len(df), "successes": int(df["success"].sum()),
            "steps": steps, "eval_s": eval_s, "e2e_s": e2e_s, "steps_per_s": steps / eval_s,
            "_df": df}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="MT10 x 1 episode and a smaller vla-eval grid (< 10 min)")
    parser.add_argument("--tasks", type=int, default=None, help="first K MT10 tasks (10)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per task")
    parser.add_argument("--skip-vla-eval", action="store_true")
    args = parser.parse_args()
    use_headless_rendering()
    n_tasks = args.tasks or 10
    episodes = args.episodes or (1 if args.quick else 3)
    config = workload(n_tasks, episodes)
    plan = workbench.plan_episodes("metaworld", "MT10", config.task_names(), episodes)
    cores = psutil.cpu_count() or 1
    grid = [(2, 1, 0.0), (2, 2, 10.0), (3, 3, 10.0)] if args.quick else \
        [(2, 1, 0.0), (2, 2, 10.0), (3, 3, 10.0), (4, 4, 10.0), (4, 2, 5.0)]

    parts = build_components(config)
    cost = measure_step_cost(parts, plan, cores)  # the definition: one process alone
    loaded = measure_step_cost(parts, plan, cores, processes=cores)  # all cores busy
    rows = [run_sequential(config)]
    fixed, _ = run_pool(config, PoolConfig(cores, 1, max_batch=cores, max_wait_ms=5.0), cores)
    searched, probes = run_pool(config, None, cores)
    rows += [fixed, searched]
    vla_table = pd.DataFrame()
    if not args.skip_vla_eval:
        vla, vla_table = run_vla_eval_tuned(plan, 2 if args.quick else 4, grid)
        rows.append(vla)

    seq, frames = rows[0], {r["system"]: r.pop("_df") for r in rows}
    table = pd.DataFrame(rows)
    table["speedup"] = table["steps_per_s"] / seq["steps_per_s"]
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.precision", 2):
        print(f"limit: {cost.limit_steps_per_s:.1f} steps/s ({cost.cpu_s_per_step * 1000:.1f} "
              f"CPU ms per step over {cost.steps} steps, one process, {cores} cores)")
        print(f"with all cores busy: {loaded.cpu_s_per_step * 1000:.1f} CPU ms per step "
              f"(limit {loaded.limit_steps_per_s:.1f} steps/s); {cores} independent "
              f"in-process loops together: {loaded.independent_steps_per_s:.1f} steps/s")
        print(table.fillna("").to_string(index=False))
        print("\nconcurrency search probes:")
        print(probes.to_string(index=False))
        if not vla_table.empty:
            print("\nvla-eval tuning (probe list):")
            print(vla_table.to_string(index=False))
    best_wb = max(fixed["steps_per_s"], searched["steps_per_s"])
    agree = [outcome_agreement(frames["sequential"], frames[name])
             for name in ("workbench fixed", "workbench search")]
    summary = {
        "speedup_vs_sequential": round(searched["steps_per_s"] / seq["steps_per_s"], 3),
        "speedup_vs_vla_eval": (round(searched["steps_per_s"] / rows[-1]["steps_per_s"], 3)
                                if not args.skip_vla_eval else None),
        "efficiency_vs_limit": round(best_wb / cost.limit_steps_per_s, 3),
        "efficiency_vs_loaded_limit": round(best_wb / loaded.limit_steps_per_s, 3),
        "efficiency_vs_independent_loops": round(best_wb / loaded.independent_steps_per_s, 3),
        "e2e_speedup_vs_sequential": round(seq["e2e_s"] / fixed["e2e_s"], 3),
        "success_agreement": min(a["success_agreement"] for a in agree),
        "terminal_agreement": min(a["terminal_agreement"] for a in agree),
        "limit_steps_per_s": round(cost.limit_steps_per_s, 2),
        "episodes": len(plan),
        "search_s": searched["search_s"],
        # what the search would cost against a 500-episode evaluation at the chosen rate
        "search_fraction_of_500_episode_eval": round(
            searched["search_s"] / (500 * searched["steps"] / searched["episodes"]
                                    / searched["steps_per_s"]), 3),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
