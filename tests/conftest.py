import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("LP_NUM_THREADS", "0")  # llvmpipe in the calling thread

# A package outside the workbench (a policy and a benchmark), importable by the tests'
# own processes and by the pool and Ray processes they start.
PLUGINS = str(Path(__file__).resolve().parent / "plugins")
sys.path.insert(0, PLUGINS)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (PLUGINS, os.environ.get("PYTHONPATH")) if p)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import workbench  # noqa: E402
from workbench.contracts.protocols import get_protocol  # noqa: E402


def pytest_configure(config):
    """Where tests/reliability count what they tried (shared by xdist's workers)."""
    if "WORKBENCH_RELIABILITY_TALLY" not in os.environ:
        import tempfile

        handle, path = tempfile.mkstemp(prefix="workbench-reliability-", suffix=".jsonl")
        os.close(handle)
        os.environ["WORKBENCH_RELIABILITY_TALLY"] = path
        config._reliability_tally = path


def pytest_terminal_summary(terminalreporter, config):
    path = getattr(config, "_reliability_tally", None)
    if path is None:
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent / "reliability"))
    from tally import summary

    line = summary(path)
    if line:
        terminalreporter.write_line(line)
    os.unlink(path)


@pytest.fixture(scope="session")
def pick_place():
    from workbench.benchmarks import make_benchmark

    adapter = make_benchmark("metaworld", suite="MT1:pick-place-v3", image_size=64)
    yield adapter
    adapter.close()


def pytest_collection_modifyitems(config, items):
    """Notebooks run in two tiers: nbval at their defaults, and tests/test_notebooks{,_second}.py
    through papermill at their tiny parameters. Where a notebook's tiny parameters are its
    defaults (no value changed but where figures go), the two runs would be the same run:
    its nbval cells are left to the papermill tier, which runs those very values."""
    from workbench.reproduce import notebook_parameters

    same, kept = [], []
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb" and not {k: v for k, v in notebook_parameters(path, "tiny")
                                            .items() if k not in ("figures_dir", "output_dir")}:
            same.append(item)
        else:
            kept.append(item)
    if same:
        config.hook.pytest_deselected(items=same)
        items[:] = kept


# -- checks every runnable benchmark family shares (tests/benchmarks) ----------------------
# Outcomes that do not depend on where an episode ran, and cameras rendered only when a
# policy reads them.

OUTCOME = ["episode_id", "success", "terminal_step", "steps"]


def _same_outcomes_everywhere(config: dict, tmp_path, *, workers: int = 2, shards: int = 2):
    """Runs ``config`` in one process, on a pool of ``workers`` and as ``shards`` separate
    shards; asserts the outcome columns are identical and every worker and shard had
    episodes. Returns the one-process run."""
    one = workbench.run({**config, "output_dir": str(tmp_path / "one")})
    pool = workbench.run({**config, "backend": "pool", "pool": {"workers": workers},
                          "output_dir": str(tmp_path / "pool")})
    parts = [workbench.run({**config, "shards": shards, "shard": k,
                            "output_dir": str(tmp_path / f"shard{k}")}).results
             for k in range(shards)]
    assert one.results[OUTCOME].equals(pool.results[OUTCOME])
    assert sorted({r["worker"] for r in pool.report.rows}) == [f"worker-{k}"
                                                              for k in range(workers)]
    assert all(len(part) for part in parts), "every shard had episodes"
    joined = pd.concat([part[OUTCOME] for part in parts]).sort_values("episode_id")
    joined = joined.reset_index(drop=True)
    assert joined.equals(one.results[OUTCOME])
    return one


@pytest.fixture
def same_outcomes_everywhere():
    return _same_outcomes_everywhere


class _RenderCounter(workbench.EpisodeObserver):
    def __init__(self):
        self.renders, self.acts = 0, 0

    def on_observe(self, adapter, step, observation, render_s, read_s):
        self.renders += sum(k.startswith("images.") for k in observation)

    def on_act(self, step, observation, actions, seconds):
        self.acts += 1


def _chunked_policy(protocol: str, features: tuple, chunk: int, hold_state: bool):
    class Chunked(workbench.Policy):
        """Reads ``features`` once per chunk and returns zeros, or the state held."""
        name = "chunked"

        @property
        def capabilities(self):
            return workbench.Capabilities(protocol, features, chunk_size=chunk)

        def _act(self, observation, episode_state):
            if hold_state:
                return np.repeat(observation["state"][None], chunk, axis=0)
            dim = get_protocol(protocol).action.dim
            return np.zeros((chunk, dim), np.float32)

    return Chunked


def _renders_per_run(config: dict, tmp_path, *, protocol: str, features: tuple, chunk: int,
                     steps: int, hold_state: bool = False) -> tuple[int, int, int]:
    """Runs one episode of ``steps`` steps with a policy reading ``features`` once per chunk
    of ``chunk`` actions; returns (steps taken, policy calls, camera frames rendered)."""
    counter = _RenderCounter()
    run = workbench.run({**config, "policy": _chunked_policy(protocol, features, chunk,
                                                             hold_state),
                         "max_steps": steps, "observe": "chunk_boundary", "episodes": 1,
                         "output_dir": str(tmp_path / "renders")}, observers=[counter])
    return int(run.results["steps"].iloc[0]), counter.acts, counter.renders


@pytest.fixture
def renders_per_run():
    return _renders_per_run
