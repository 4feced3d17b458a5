"""What pinning llvmpipe to the calling thread saves: MetaWorld's cameras rendered with
``LP_NUM_THREADS=0`` (rasterizing in the caller: what ``pin_threads(1)`` sets) against
``LP_NUM_THREADS=1`` (one rasterizer thread beside the caller: what it set before),
everything else pinned to one thread, on ``perf/throughput.py --quick``'s workload
(4 MT10 tasks x 1 episode, 48-step cap, the vision-cost expert, both cameras at 224 px).

Rows, each a fresh process per measurement (environments built and warmed before the
clock, the policy in-process), in an order drawn per round:

- ``alone lp0`` / ``alone lp1``: one process runs the list; CPU seconds and wall seconds
  per step (CPU above wall means a second thread worked at the same time).
- ``together lp0`` / ``together lp1``: cores + 1 processes at once, each the whole list
  (as a pool's workers and replica share the cores); steps of all over the slowest's wall.

Ratios per round, then median and range: ``cpu_per_step_lp1_over_lp0`` (alone),
``together_rate_lp0_over_lp1``. The frames are the same either way (tests/runtime/
test_pinned_rendering.py compares them byte for byte).

    python perf/render_threads.py [--rounds 3] [--every-step] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(lp: str, every_step: bool) -> None:
    """Run the quick list once in this process with ``LP_NUM_THREADS=lp``; print JSON."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ["LP_NUM_THREADS"] = lp
    sys.path.insert(0, str(HERE))
    import throughput  # noqa: E402  (keeps the variables set above)

    import workbench  # noqa: E402
    from workbench.contracts import use_headless_rendering  # noqa: E402
    from workbench.contracts.capabilities import LoadContext  # noqa: E402
    from workbench.runtime.episode import run_episode, warm_up  # noqa: E402
    from workbench.runtime.job import build_components  # noqa: E402

    use_headless_rendering()
    config = throughput.workload(list(throughput.QUICK_TASKS), 1, 224,
                                 throughput.QUICK_MAX_STEPS)
    parts = build_components(config)
    plan = workbench.plan_episodes("metaworld", "MT10", config.task_names(), 1)
    adapter, policy = parts.adapter_factory(), parts.policy_factory()
    policy.load(LoadContext(parts.protocol.name))
    warm_up(adapter, plan, policy.capabilities.features)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()  # every process of a measurement starts its clock together
    wall, cpu = time.perf_counter(), time.process_time()
    steps = sum(run_episode(adapter, policy, spec, observe_every_step=every_step,
                            max_steps=config.max_steps).steps for spec in plan)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    adapter.close()
    print(json.dumps({"steps": steps, "cpu_s": cpu, "wall_s": wall}), flush=True)


def measure(lp: str, processes: int, every_step: bool) -> dict:
    """``processes`` children with ``LP_NUM_THREADS=lp``, their clocks started together."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    procs = [subprocess.Popen([sys.executable, __file__, "--child", lp]
                              + (["--every-step"] if every_step else []),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env) for _ in range(processes)]
    for proc in procs:
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"a measuring process failed to start (LP_NUM_THREADS={lp})")
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    found = []
    for proc in procs:
        out, _ = proc.communicate(timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(f"a measuring process exited with {proc.returncode}")
        found.append(json.loads(out.strip().splitlines()[-1]))
    steps = sum(f["steps"] for f in found)
    return {"steps": steps, "cpu_ms_per_step": 1e3 * sum(f["cpu_s"] for f in found) / steps,
            "wall_ms_per_step": 1e3 * max(f["wall_s"] for f in found) / found[0]["steps"],
            "steps_per_s": steps / max(f["wall_s"] for f in found), "processes": processes}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--every-step", action="store_true",
                        help="render at every step (default: at chunk boundaries)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.every_step)
        return {}
    if args.rounds < 1:
        parser.error(f"--rounds: expected an integer >= 1; got {args.rounds}")
    sys.path.insert(0, str(HERE))
    import psutil

    from throughput import provenance

    started = provenance()
    cores = psutil.cpu_count() or 1
    table = {f"{kind} lp{lp}": (lp, 1 if kind == "alone" else cores + 1)
             for kind in ("alone", "together") for lp in ("0", "1")}
    rows, orders = [], []
    for round_ in range(args.rounds):
        order = list(table)
        random.Random(args.seed * 1000 + round_).shuffle(order)
        orders.append(order)
        for name in order:
            row = {"system": name, "round": round_, **measure(*table[name], args.every_step)}
            rows.append(row)
            print(f"round {round_} {name:12s} {row['steps_per_s']:7.2f} steps/s  CPU "
                  f"{row['cpu_ms_per_step']:6.1f} ms/step  wall {row['wall_ms_per_step']:6.1f}"
                  f" ms/step", flush=True)

    def per_round(top: str, bottom: str, quantity: str) -> dict:
        values = []
        for k in range(args.rounds):
            (a,) = [r for r in rows if r["system"] == top and r["round"] == k]
            (b,) = [r for r in rows if r["system"] == bottom and r["round"] == k]
            values.append(a[quantity] / b[quantity])
        return {"numerator": top, "denominator": bottom, "quantity": quantity,
                "value": statistics.median(values), "min": min(values), "max": max(values)}

    ratios = {"cpu_per_step_lp1_over_lp0": per_round("alone lp1", "alone lp0",
                                                     "cpu_ms_per_step"),
              "alone_rate_lp0_over_lp1": per_round("alone lp0", "alone lp1", "steps_per_s"),
              "together_rate_lp0_over_lp1": per_round("together lp0", "together lp1",
                                                      "steps_per_s")}
    summary = {"provenance": {**started, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
               "workload": {"every_step": args.every_step, "rounds": args.rounds,
                            "orders": orders, "cores": cores, "seed": args.seed},
               "rows": rows, "ratios": ratios}
    for name, r in ratios.items():
        print(f"{name}: {r['value']:.3f} ({r['min']:.3f}-{r['max']:.3f})")
    line = json.dumps(summary)
    if args.json:
        Path(args.json).write_text(line + "\n")
    print(line)
    return summary


if __name__ == "__main__":
    main()
