"""Throughput on MetaWorld MT10, every system side by side in one interleaved run.

Workload: the scripted expert wrapped to pay the vision policy's full cost
(``expert-vision-cost``: both cameras at 224x224 and the default render quality, the
VisionPolicy network run at every chunk boundary, chunks of 8), so episodes end by
success as in a real evaluation. Every system runs the same episode list.

Systems (one row kind each; the workbench's through its runner, ``workbench.run``):

- ``sequential``: the official-like loop, one process, an observation rendered every step;
- ``single chunk``: one process, cameras rendered only at chunk boundaries;
- ``ceiling``: N = cores independent single-process loops (as ``single chunk``) on
  disjoint parts of the episode list, balanced by the steps each episode took in this
  round's ``single chunk`` row, run at once with no coordination at all;
- ``pool every step``: the two pools (N workers, 1 replica), rendering every step;
- ``pool chunk fixed``: the two pools at that fixed configuration, chunk boundaries;
- ``pool chunk searched``: the concurrency search, then its choice; the probes' episodes
  count (the policy is runtime-invariant), so its ``eval_s`` is the search's seconds plus
  the chosen configuration's, over every episode's steps, and its ``e2e_s`` includes the
  search;
- ``ray``: the Ray backend, one shard of N worker actors and 1 replica actor, chunk
  boundaries (Ray itself is started once, before the rounds);
- ``vla-eval png`` / ``vla-eval raw``: ``vla-eval run --no-docker`` shards against its
  batching model server, as shipped (PNG images on the wire) and with its raw image
  codec, at the configuration tuned once, before the rounds, on a probe list.

Each round runs every system once in this order; ``--rounds`` rounds (3) give
A B C ... A B C ... Every row has ``eval_s`` (first episode handed out to the last
result, environments built before: the warm rate ``steps_per_s``) and ``e2e_s`` (the
whole call: processes, model loads, environment builds, search; ``e2e_steps_per_s``).
Medians and ranges are over the rounds; every ratio divides the medians of two named
rows in one named quantity, and a family of ratios keeps its row kind.

    python perf/throughput.py [--quick] [--rounds 3] [--tasks K] [--episodes N]

Prints the rows, the medians and the ratios, and last one JSON line (also written to
``--json``) with ``rows``, ``medians``, ``ratios``, ``targets``, ``agreement``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd  # noqa: E402
import psutil  # noqa: E402

import workbench  # noqa: E402
from workbench.config import EvalConfig, PoolConfig  # noqa: E402
from workbench.contracts import use_headless_rendering  # noqa: E402
from workbench.runtime.agreement import outcome_agreement  # noqa: E402
from workbench.runtime.job import build_components  # noqa: E402
from workbench.runtime.limits import balanced_split, independent_loops  # noqa: E402

POLICY = ("expert-vision-cost", {"chunk_size": 8})
QUANTITIES = ("steps_per_s", "e2e_steps_per_s", "eval_s", "e2e_s")

#: name: (numerator row, denominator row, quantity). Families keep their row kind: every
#: speedup divides warm rates (``steps_per_s``) with ``pool chunk fixed`` on top, every
#: end-to-end ratio divides whole calls.
RATIOS: dict[str, tuple[str, str, str]] = {
    # each factor on its own row
    "rendering_less": ("single chunk", "sequential", "steps_per_s"),
    "more_processes_every_step": ("pool every step", "sequential", "steps_per_s"),
    "more_processes_chunk": ("pool chunk fixed", "single chunk", "steps_per_s"),
    "rendering_less_in_pools": ("pool chunk fixed", "pool every step", "steps_per_s"),
    # the headline speedups (warm rates)
    "speedup_vs_sequential": ("pool chunk fixed", "sequential", "steps_per_s"),
    "speedup_vs_vla_eval_png": ("pool chunk fixed", "vla-eval png", "steps_per_s"),
    "speedup_vs_vla_eval_raw": ("pool chunk fixed", "vla-eval raw", "steps_per_s"),
    "vla_eval_raw_over_png": ("vla-eval raw", "vla-eval png", "steps_per_s"),
    "efficiency_vs_ceiling": ("pool chunk fixed", "ceiling", "steps_per_s"),
    "searched_vs_ceiling": ("pool chunk searched", "ceiling", "steps_per_s"),
    "ray_over_pool": ("ray", "pool chunk fixed", "steps_per_s"),
    # end to end (start-up, and for the searched row the search, included)
    "e2e_speedup_vs_sequential": ("pool chunk fixed", "sequential", "e2e_steps_per_s"),
    "e2e_speedup_vs_vla_eval_png": ("pool chunk fixed", "vla-eval png", "e2e_steps_per_s"),
    "searched_e2e_over_fixed_e2e": ("pool chunk searched", "pool chunk fixed", "e2e_s"),
}

#: name: (ratio, comparison, bound): the runtime targets of the issues.
TARGETS = {
    "speedup_vs_sequential >= 7": ("speedup_vs_sequential", ">=", 7.0),
    "speedup_vs_vla_eval_best >= 5.5": ("speedup_vs_vla_eval_best", ">=", 5.5),
    "efficiency_vs_ceiling >= 0.9": ("efficiency_vs_ceiling", ">=", 0.9),
    "e2e_speedup_vs_sequential >= 5": ("e2e_speedup_vs_sequential", ">=", 5.0),
    "searched_e2e_over_fixed_e2e <= 1.3": ("searched_e2e_over_fixed_e2e", "<=", 1.3),
    "ray_over_pool >= 0.85": ("ray_over_pool", ">=", 0.85),
}


def workload(n_tasks: int, episodes: int, image_size: int, max_steps: int | None
             ) -> EvalConfig:
    """The first ``n_tasks`` MT10 tasks with the vision-cost expert; records go to a
    scratch folder (one run id per row)."""
    config = workbench.load_config(dict(
        benchmark="metaworld", suite="MT10", episodes=episodes, policy=POLICY[0],
        policy_options=POLICY[1], image_size=image_size, max_steps=max_steps, progress=False,
        warm_up=True, output_dir=tempfile.mkdtemp(prefix="throughput-")))
    return config.replace(tasks=config.task_names()[:n_tasks])


class Systems:
    """Every measured system, as a method per row (name -> measurement)."""

    def __init__(self, config: EvalConfig, cores: int, search: dict, vla: dict | None) -> None:
        self.config, self.cores, self.search, self.vla = config, cores, search, vla
        self.pool = PoolConfig(cores, 1, max_batch=cores, max_wait_ms=5.0)
        self.parts = build_components(config)
        self.plan = workbench.plan_episodes("metaworld", "MT10", config.task_names(),
                                            config.episodes)
        self.steps: dict[str, int] = {}  # per episode, from this round's single chunk row

    def table(self) -> dict[str, Callable[[int], dict]]:
        rows: dict[str, Callable[[int], dict]] = {
            "sequential": lambda r: self.run(r, "sequential", backend="sequential",
                                             observe="every_step"),
            "single chunk": self.single_chunk,
            "ceiling": self.ceiling,
            "pool every step": lambda r: self.run(r, "pool every step", backend="pool",
                                                  pool=self.pool, observe="every_step"),
            "pool chunk fixed": lambda r: self.run(r, "pool chunk fixed", backend="pool",
                                                   pool=self.pool, observe="chunk_boundary"),
            "pool chunk searched": lambda r: self.run(
                r, "pool chunk searched", backend="pool", observe="chunk_boundary",
                search={"enabled": True, **self.search}),
            "ray": lambda r: self.run(r, "ray", backend="ray", pool=self.pool,
                                      observe="chunk_boundary",
                                      ray={"shards": 1, "cpus_per_shard": self.cores}),
        }
        if self.vla is not None:
            rows["vla-eval png"] = lambda r: self.vla_eval(r, "png")
            rows["vla-eval raw"] = lambda r: self.vla_eval(r, "raw")
        return rows

    def run(self, round_: int, name: str, **changes: Any) -> dict:
        slug = name.replace(" ", "-")
        result = workbench.run(self.config.replace(run_id=f"{slug}-{round_}", **changes))
        report, search = result.report, result.search
        # the searched row's probes run the plan's episodes (they count): its warm time is
        # the search's plus the chosen configuration's, over every episode's steps
        eval_s = report.wall_s + (search.search_s if search is not None else 0.0)
        row = _row(name, report.pool.label if report.pool else "1 process", eval_s,
                   result.e2e_s, result.results)
        if search is not None:
            row.update(search_s=search.search_s, probes=len(search.probes),
                       probe_steps=row["steps"] - report.steps)
        return row

    def single_chunk(self, round_: int) -> dict:
        row = self.run(round_, "single chunk", backend="sequential", observe="chunk_boundary")
        self.steps = dict(zip(row["_df"]["episode_id"], row["_df"]["steps"].astype(int)))
        return row

    def ceiling(self, round_: int) -> dict:
        start = time.perf_counter()
        cost = independent_loops(self.parts, balanced_split(self.plan, self.steps, self.cores),
                                 max_steps=self.config.max_steps)
        # steps over the slowest loop's wall time: cost.independent_steps_per_s
        return _row("ceiling", f"{self.cores} independent loops", cost.wall_s,
                    time.perf_counter() - start, steps=cost.steps, episodes=len(self.plan))

    def vla_eval(self, round_: int, image_format: str) -> dict:
        from vla_eval_metaworld import run_vla_eval

        tasks = list(self.config.task_names())
        start = time.perf_counter()
        df = run_vla_eval(tasks, self.config.episodes, image_format=image_format,
                          **self.vla["common"], **self.vla["best"])
        e2e = time.perf_counter() - start
        df = df.assign(episode_id=[f"metaworld/MT10/{t}/{int(e):04d}"
                                   for t, e in zip(df["task"], df["episode"])])
        best = self.vla["best"]
        return _row(f"vla-eval {image_format}", f"{best['shards']} shards "
                    f"b{best['max_batch']} w{best['max_wait_ms']:g}ms", _span(df), e2e, df)


def tune_vla_eval(tasks: list[str], grid: list[tuple[int, int, float]], max_steps: int | None
                  ) -> tuple[dict, pd.DataFrame]:
    """vla-eval's best (shards, max batch, wait) on a probe list, as shipped (PNG)."""
    from vla_eval_metaworld import run_vla_eval

    common = dict(extra_cost_factory="vla_eval_expert_server:make_workbench_vision_cost",
                  extra_cost_kwargs={"chunk_size": POLICY[1]["chunk_size"], "num_threads": 1},
                  chunk_size=POLICY[1]["chunk_size"], keep_output=False)
    if max_steps:
        common["max_steps"] = max_steps
    tuning = []
    for shards, batch, wait_ms in grid:
        df = run_vla_eval(tasks, 1, batch, wait_ms, shards, **common)
        tuning.append({"shards": shards, "max_batch": batch, "max_wait_ms": wait_ms,
                       "steps": int(df["steps"].sum()),
                       "steps_per_s": df["steps"].sum() / _span(df)})
    table = pd.DataFrame(tuning)
    best = table.sort_values("steps_per_s", ascending=False).iloc[0]
    return {"common": common, "best": {"shards": int(best["shards"]),
                                       "max_batch": int(best["max_batch"]),
                                       "max_wait_ms": float(best["max_wait_ms"])}}, table


def _span(df: pd.DataFrame) -> float:
    """Seconds from vla-eval's first episode start to its last episode end."""
    return float(df["t_end"].max() - df["t_start"].min())


def _row(name: str, config: str, eval_s: float, e2e_s: float, df: pd.DataFrame | None = None,
         steps: int | None = None, episodes: int | None = None) -> dict:
    """One measurement: the episodes of ``df`` (or, without per-episode outcomes, the
    ``steps`` and ``episodes`` counted), its warm and whole-call seconds and rates."""
    if df is not None:
        steps, episodes = int(df["steps"].sum()), len(df)
    return {"system": name, "config": config, "episodes": episodes,
            "successes": None if df is None else int(df["success"].sum()), "steps": steps,
            "eval_s": eval_s, "e2e_s": e2e_s, "steps_per_s": steps / eval_s,
            "e2e_steps_per_s": steps / e2e_s, "_df": df}


def summarize(rows: list[dict]) -> tuple[dict, dict]:
    """Medians and ranges per system over the rounds, and every ratio of
    :data:`RATIOS` (plus ``speedup_vs_vla_eval_best``) between present rows."""
    medians: dict[str, dict] = {}
    for system in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == system]
        medians[system] = {q: {"median": statistics.median(r[q] for r in mine),
                               "min": min(r[q] for r in mine), "max": max(r[q] for r in mine)}
                           for q in QUANTITIES}
        medians[system]["runs"] = len(mine)
    ratios = {}
    wanted = dict(RATIOS)
    vla = [s for s in ("vla-eval png", "vla-eval raw") if s in medians]
    if vla:  # vla-eval's best row, by its median warm rate
        best = max(vla, key=lambda s: medians[s]["steps_per_s"]["median"])
        wanted["speedup_vs_vla_eval_best"] = ("pool chunk fixed", best, "steps_per_s")
    for name, (top, bottom, quantity) in wanted.items():
        if top in medians and bottom in medians:
            value = medians[top][quantity]["median"] / medians[bottom][quantity]["median"]
            ratios[name] = {"numerator": top, "denominator": bottom, "quantity": quantity,
                            "value": value}
    return medians, ratios


def check_targets(ratios: dict) -> dict:
    out = {}
    for name, (ratio, op, bound) in TARGETS.items():
        if ratio in ratios:
            value = ratios[ratio]["value"]
            out[name] = bool(value >= bound if op == ">=" else value <= bound)
    return out


def agreement(rows: list[dict]) -> dict:
    """Success and terminal-step agreement of every workbench row against the same
    round's sequential row (the ceiling keeps no per-episode outcomes; vla-eval's export
    counts steps its own way, so its rows are compared by success only, elsewhere)."""
    out: dict[str, dict] = {}
    for row in rows:
        if row["system"] == "sequential" or row["_df"] is None \
                or row["system"].startswith("vla-eval"):
            continue
        (reference,) = [r["_df"] for r in rows
                        if r["system"] == "sequential" and r["round"] == row["round"]]
        found = outcome_agreement(reference, row["_df"])
        mine = out.setdefault(row["system"], {"success_agreement": 1.0,
                                              "terminal_agreement": 1.0})
        for key in mine:
            mine[key] = min(mine[key], found[key])
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="MT10 x 1 episode and a two-point vla-eval grid")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--tasks", type=int, default=None, help="first K MT10 tasks (10)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per task")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--max-steps", type=int, default=None, help="step cap (500)")
    parser.add_argument("--search-max-workers", type=int, default=None,
                        help="the search's largest worker count (2 x cores)")
    parser.add_argument("--skip-vla-eval", action="store_true")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--json", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    use_headless_rendering()
    cores = psutil.cpu_count() or 1
    config = workload(args.tasks or 10, args.episodes or (1 if args.quick else 3),
                      args.image_size, args.max_steps)
    search = {"max_workers": args.search_max_workers or 2 * cores, "max_replicas": 2}
    vla, vla_table = None, pd.DataFrame()
    if not args.skip_vla_eval:
        grid = [(2, 1, 0.0), (2, 2, 10.0)] if args.quick else \
            [(2, 1, 0.0), (2, 2, 10.0), (3, 3, 10.0), (4, 4, 10.0), (4, 2, 5.0)]
        vla, vla_table = tune_vla_eval(list(config.task_names())[:2 if args.quick else 4],
                                       grid, args.max_steps)
    systems = Systems(config, cores, search, vla)
    table = systems.table()
    if args.skip_ray:
        table.pop("ray")
    else:
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    rows = []
    for round_ in range(args.rounds):
        for name, measure in table.items():
            row = measure(round_)
            row["round"] = round_
            rows.append(row)
            print(f"round {round_} {name:20s} {row['steps_per_s']:8.2f} steps/s  "
                  f"eval {row['eval_s']:7.1f} s  e2e {row['e2e_s']:7.1f} s  "
                  f"{row['config']}", flush=True)
    medians, ratios = summarize(rows)
    agree = agreement(rows)
    summary = {
        "workload": {"tasks": list(config.task_names()), "episodes_per_task": config.episodes,
                     "image_size": config.image_size, "max_steps": config.max_steps,
                     "cores": cores, "rounds": args.rounds, "order": list(table)},
        "rows": [{k: v for k, v in r.items() if k != "_df"} for r in rows],
        "medians": medians, "ratios": ratios, "targets": check_targets(ratios),
        "agreement": agree, "vla_eval_tuning": vla_table.to_dict("records"),
    }
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.precision", 2):
        print("\nmedians (min-max) over the rounds:")
        print(pd.DataFrame([{"system": s, **{q: f"{m[q]['median']:.2f} ({m[q]['min']:.2f}-"
                                                 f"{m[q]['max']:.2f})" for q in QUANTITIES}}
                            for s, m in medians.items()]).to_string(index=False))
        print("\nratios (medians of the named rows):")
        print(pd.DataFrame([{"ratio": n, **r} for n, r in ratios.items()]).to_string(
            index=False))
        if not vla_table.empty:
            print("\nvla-eval tuning (probe list, PNG):")
            print(vla_table.to_string(index=False))
    line = json.dumps(summary, default=float)
    if args.json:
        Path(args.json).write_text(line + "\n")
    print(line)
    return summary


if __name__ == "__main__":
    main()
