"""Steps/s of the sequential (official-like) evaluator on MetaWorld MT10.

Workload: the vision policy (random weights, action chunks of 8) reading both cameras
at 224x224 and the default render quality; an observation rendered at every step.
The untrained policy never succeeds, so each episode is capped at ``--max-steps``
steps to bound the measurement; steps/s does not depend on the cap.

    python perf/sequential_baseline.py [--episodes 1] [--max-steps 40]

Prints a table per task and, last, one JSON line with the aggregate steps/s.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import workbench
from workbench.contracts import use_headless_rendering


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1, help="episodes per task")
    parser.add_argument("--max-steps", type=int, default=40, help="step cap per episode")
    parser.add_argument("--policy", default="vision", help="vision or expert-vision-cost")
    args = parser.parse_args()
    use_headless_rendering()
    result = workbench.run(dict(
        benchmark="metaworld", suite="MT10", episodes=args.episodes, max_steps=args.max_steps,
        policy=args.policy, policy_options={"chunk_size": 8}, image_size=224,
        backend="sequential", progress=False, output_dir=tempfile.mkdtemp(prefix="baseline-")))
    df, report = result.results, result.report
    table = df.groupby("task").agg(episodes=("steps", "size"), steps=("steps", "sum"),
                                   wall_s=("wall_s", "sum"), successes=("success", "sum"))
    table["steps_per_s"] = table["steps"] / table["wall_s"]
    print(table.round(2).to_string())
    print(json.dumps({"system": "sequential", "policy": args.policy, "episodes": len(df),
                      "steps": report.steps, "eval_s": report.wall_s, "setup_s": report.setup_s,
                      "steps_per_s": report.steps_per_s,
                      "successes": int(df["success"].sum())}))


if __name__ == "__main__":
    main()
