"""A process pinned to one thread renders in that thread (llvmpipe rasterizing in the
caller, no rasterizer thread beside it), and the pixels are those of a multithreaded
render: pinning changes the cost of a frame, never the frame."""

import glob
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict

import workbench
from workbench.config import PoolConfig

RENDER = """
import glob, hashlib, os, sys
from workbench.runtime.replica import pin_threads
pin_threads(int(sys.argv[1]))
import numpy as np
import workbench
from workbench.benchmarks.metaworld import MetaWorldAdapter
adapter = MetaWorldAdapter("MT10", image_size=48)
digest = hashlib.sha256()
for spec in workbench.plan_episodes("metaworld", "MT10", ["reach-v3", "push-v3"], 1):
    adapter.reset(spec)
    for action in np.random.default_rng(0).uniform(-1, 1, (4, 4)).astype(np.float32):
        adapter.step(action)
        for feature in ("images.primary", "images.wrist"):
            digest.update(adapter.render(feature).tobytes())
threads = sorted(open(t).read().strip() for t in glob.glob("/proc/self/task/*/comm"))
adapter.close()
print(os.environ["LP_NUM_THREADS"], digest.hexdigest(), ",".join(threads))
"""


def render(threads: int) -> tuple[str, str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", RENDER, str(threads)], capture_output=True,
                          text=True, timeout=300, env={**env, "MUJOCO_GL": "egl"})
    assert done.returncode == 0, done.stderr[-2000:]
    lp, digest, names = done.stdout.split()
    return lp, digest, names.split(",")


def test_one_thread_rasterizes_in_the_caller_and_draws_the_same_pixels():
    one, two = render(1), render(2)
    assert one[0] == "0" and two[0] == "2"
    assert not [n for n in one[2] if n.startswith("llvmpipe")], one[2]
    assert len([n for n in two[2] if n.startswith("llvmpipe")]) == 2, two[2]
    assert one[1] == two[1]  # the same frames, byte for byte


def test_pool_workers_render_in_their_own_thread(tmp_path):
    """The pool's worker processes (named wb-worker-N) pin themselves: while an evaluation
    with cameras runs, none of them has a rasterizer thread."""
    seen: dict[str, set[str]] = defaultdict(set)
    done = threading.Event()

    def scan() -> None:
        while not done.is_set():
            for path in glob.glob("/proc/[0-9]*/task/*/comm"):
                pid = path.split("/")[2]
                try:
                    process = open(f"/proc/{pid}/comm").read().strip()
                    if process.startswith("wb-worker-"):
                        seen[f"{pid}:{process}"].add(open(path).read().strip())
                except OSError:  # the process or thread ended meanwhile
                    pass
            time.sleep(0.2)

    scanner = threading.Thread(target=scan, daemon=True)
    scanner.start()
    config = workbench.load_config(dict(
        benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"], episodes=1,
        policy="expert-vision-cost", policy_options={"chunk_size": 4}, image_size=32,
        max_steps=12, progress=False, backend="pool", output_dir=str(tmp_path),
        pool=PoolConfig(2, 1, max_batch=2)))
    result = workbench.run(config)
    done.set()
    scanner.join()
    assert len(result.results) == 2 and (result.results["steps"] > 0).all()
    assert len(seen) == 2, dict(seen)  # both workers were seen, with their threads
    for worker, names in seen.items():
        assert not [n for n in names if n.startswith("llvmpipe")], (worker, names)
