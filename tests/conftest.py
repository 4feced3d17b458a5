import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("LP_NUM_THREADS", "1")

# A package outside the workbench (a policy and a benchmark), importable by the tests'
# own processes and by the pool and Ray processes they start.
PLUGINS = str(Path(__file__).resolve().parent / "plugins")
sys.path.insert(0, PLUGINS)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (PLUGINS, os.environ.get("PYTHONPATH")) if p)

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def pick_place():
    from workbench.benchmarks import make_benchmark

    adapter = make_benchmark("metaworld", suite="MT1:pick-place-v3", image_size=64)
    yield adapter
    adapter.close()
