import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("LP_NUM_THREADS", "1")

import pytest


@pytest.fixture(scope="session")
def pick_place():
    from workbench.benchmarks.metaworld import MetaWorldAdapter

    adapter = MetaWorldAdapter("MT1:pick-place-v3", image_size=64)
    yield adapter
    adapter.close()
