"""Steps/s of the sequential (official-like) evaluator on MetaWorld MT10.

Workload: the vision policy (random weights, action chunks of 8) reading both cameras
at 224x224 and the default render quality; an observation rendered at every step.
The untrained policy never succeeds, so each episode is capped at ``--max-steps``
steps to bound the measurement; steps/s does not depend on the cap.

    python benchmarks/sequential_baseline.py [--episodes 1] [--max-steps 40]

Prints a table per task and, last, one JSON line with the aggregate steps/s.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("MUJOCO_GL", "egl")

from workbench.benchmarks.metaworld import MetaWorldAdapter, task_set  # noqa: E402
from workbench.plan import plan_episodes  # noqa: E402
from workbench.policies import make_policy  # noqa: E402
from workbench.records import RecordStore  # noqa: E402
from workbench.runtime.sequential import evaluate_sequential  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1, help="episodes per task")
    parser.add_argument("--max-steps", type=int, default=40, help="step cap per episode")
    parser.add_argument("--policy", default="vision", help="vision or expert-vision-cost")
    args = parser.parse_args()

    start = time.perf_counter()
    task_set("MT10")
    adapter = MetaWorldAdapter("MT10", image_size=224)
    adapter.max_steps = args.max_steps
    policy = make_policy(args.policy, chunk_size=8)
    plan = plan_episodes("metaworld", "MT10", adapter.tasks(), args.episodes)
    store = RecordStore(os.path.join(tempfile.mkdtemp(), "records.sqlite"))
    store.create_run("baseline", plan, vars(args))
    setup_s = time.perf_counter() - start
    t0 = time.perf_counter()
    df = evaluate_sequential(adapter, policy, plan, store, "baseline", progress=False)
    wall = time.perf_counter() - t0
    adapter.close()
    table = df.groupby("task").agg(episodes=("steps", "size"), steps=("steps", "sum"),
                                   wall_s=("wall_s", "sum"), successes=("success", "sum"))
    table["steps_per_s"] = table["steps"] / table["wall_s"]
    print(table.round(2).to_string())
    steps = int(df["steps"].sum())
    print(json.dumps({"system": "sequential", "policy": args.policy, "episodes": len(df),
                      "steps": steps, "eval_s": round(wall, 2), "setup_s": round(setup_s, 2),
                      "steps_per_s": round(steps / wall, 3),
                      "successes": int(df["success"].sum())}))


if __name__ == "__main__":
    main()
