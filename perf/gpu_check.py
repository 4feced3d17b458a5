"""One GPU check, under five minutes on a machine with an NVIDIA GPU; prints one JSON line.

What it exercises, each step timed and its outcome recorded (an error in one step is
recorded and the next step runs):

1. ``nvml``: GPU 0's utilisation through NVML, idle and under a matrix-multiply load
   (the busy-time sampler the profilers and probe rows use).
2. ``replicas``: a pool with ``device: cuda``, two simulator workers and two replicas of
   the vision policy (MetaWorld reach, short episodes): per-replica GPU memory after
   load, the probe row's GPU utilisation and peak GPU memory, and the outcomes.
3. ``search``: the concurrency search on the GPU (at most 4 workers, 2 replicas): the
   rules' view of the GPU (total memory, reserve), the replica footprint from the first
   probe's peak, the replica cap, every probe's GPU columns, and the choice.
4. ``mps``: only when ``nvidia-cuda-mps-control`` exists: the same two-replica pool with
   an MPS daemon of its own (pipe and log folders in a temporary directory, so no other
   user's daemon is touched), started before and told to quit after.

On a machine without a GPU it prints ``{"gpu": false, "reason": ...}`` and exits 0.

    python perf/gpu_check.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

RUN = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=4, max_steps=40,
           image_size=64, policy="vision", policy_options={"chunk_size": 8}, device="cuda",
           progress=False, interactions=False, backend="pool", warm_up=True)


def step(results: dict, name: str, body: Callable[[], dict]) -> None:
    """Run one check, keeping its result or its error, and its seconds."""
    start = time.perf_counter()
    try:
        results[name] = {"ok": True, **body()}
    except Exception as exc:
        results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                         "where": traceback.format_exc(limit=3)[-600:]}
    results[name]["seconds"] = round(time.perf_counter() - start, 2)


def check_nvml() -> dict:
    import torch

    from workbench.runtime.resources import ResourceMonitor, gpu_busy

    idle = gpu_busy(duration_s=1.0)
    a = torch.randn(4096, 4096, device="cuda")
    with ResourceMonitor(interval_s=0.1, gpu_index=0) as monitor:
        deadline = time.perf_counter() + 2.0
        while time.perf_counter() < deadline:
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()
    busy = monitor.result.gpu
    return {"device": idle.device_name, "idle_util_pct": idle.util_mean_pct,
            "busy_util_pct": busy.util_mean_pct, "busy_samples": busy.samples,
            "memory_used_max_gib": busy.memory_used_max_bytes / 2 ** 30}


def check_replicas(out: Path, tag: str = "replicas") -> dict:
    import workbench
    from workbench.runtime.search import probe_row

    run = workbench.run(dict(RUN, output_dir=str(out / tag), pool={"workers": 2, "replicas": 2}))
    row = probe_row(0, run.report)
    stats = run.report.replica_stats
    return {"devices": [s.device for s in stats],
            "replica_gpu_peak_gib": [s.gpu_peak_bytes / 2 ** 30 for s in stats],
            "gpu_util_pct": row["gpu_util_pct"], "gpu_peak_gib": row["gpu_peak_gib"],
            "steps_per_s": run.report.steps_per_s, "episodes": len(run.results),
            "errors": int(run.results["error_kind"].notna().sum()),
            "batch_sizes": dict(run.report.batch_sizes())}


def check_search(out: Path) -> dict:
    import workbench
    from workbench.runtime.search import as_dict

    run = workbench.run(dict(RUN, episodes=12, output_dir=str(out / "search"),
                             search={"enabled": True, "probe_episodes": 2, "max_workers": 4,
                                     "max_replicas": 2}))
    search = as_dict(run.search)
    columns = ("workers", "replicas", "steps_per_s", "gpu_util_pct", "gpu_peak_gib", "status",
               "reason")
    return {"best": search["best"], "replica_cap": search["replica_cap"],
            "replica_footprint_gib": search["replica_footprint_gib"],
            "memory_per_worker_gib": search["memory_per_worker_gib"],
            "decisions": search["decisions"],
            "probes": [{k: p.get(k) for k in columns} for p in search["probes"]]}


def check_mps(out: Path) -> dict:
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        return {"skipped": "nvidia-cuda-mps-control not found"}
    folder = Path(tempfile.mkdtemp(prefix="wb-mps-"))
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(folder / "pipe"),
               CUDA_MPS_LOG_DIRECTORY=str(folder / "log"))
    for key in ("pipe", "log"):
        (folder / key).mkdir()
    subprocess.run([control, "-d"], env=env, check=True, timeout=30)
    try:  # a fresh process: pool processes must start with the MPS variables set
        child = subprocess.run([sys.executable, __file__, "--replicas-only", "mps", "--out",
                                str(out)], env=env, capture_output=True, text=True,
                               timeout=240)
        lines = child.stdout.strip().splitlines()
        if child.returncode != 0 or not lines:
            raise RuntimeError(f"the MPS run failed: {child.stderr[-600:]}")
        return {"daemon": "started", **json.loads(lines[-1])}
    finally:
        subprocess.run([control], input="quit\n", text=True, env=env, timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for the runs (default: a temp dir)")
    parser.add_argument("--replicas-only", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        import torch

        reason = "" if torch.cuda.is_available() else "torch sees no CUDA device"
    except ImportError:
        reason = "torch is not installed"
    if reason:
        print(json.dumps({"gpu": False, "reason": reason}))
        return 0
    out = Path(args.out or tempfile.mkdtemp(prefix="wb-gpu-check-"))
    if args.replicas_only:  # the MPS step's own process
        print(json.dumps(check_replicas(out, args.replicas_only), default=str))
        return 0
    results: dict[str, Any] = {"gpu": True, "torch": torch.__version__,
                               "device_count": torch.cuda.device_count()}
    step(results, "nvml", check_nvml)
    step(results, "replicas", lambda: check_replicas(out))
    step(results, "search", lambda: check_search(out))
    step(results, "mps", lambda: check_mps(out))
    print(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
