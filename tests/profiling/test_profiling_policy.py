"""Policy-stage profiles of the real torch VisionPolicy on CPU."""

import math

import numpy as np
import pytest

from workbench.contracts import LoadContext
from workbench.policies import make_policy
from workbench.profiling import (
    POLICY_STAGES,
    policy_stage_table,
    profile_policy_batches,
    profile_policy_stages,
    staged_forward,
    synthetic_observations,
)

IMAGE_SIZE = 64
REPEATS = 3


@pytest.fixture(scope="module")
def policy():
    policy = make_policy("vision", protocol="metaworld-v1", chunk_size=8)
    policy.load(LoadContext("metaworld-v1", device="cpu"))
    return policy


@pytest.fixture(scope="module")
def profile(policy):
    return profile_policy_stages(policy, synthetic_observations(2, IMAGE_SIZE), REPEATS, 1)


def test_staged_forward_mirrors_the_network(policy):
    obs = synthetic_observations(3, IMAGE_SIZE, seed=1)
    out = staged_forward(policy, obs)
    assert out.shape == (3, 8, 4)
    np.testing.assert_allclose(out, policy.forward(obs), rtol=1e-6, atol=1e-6)


def test_every_stage_has_wall_and_kernel_time(profile):
    assert profile["stage"].tolist() == list(POLICY_STAGES)
    assert (profile["wall_ms"] > 0).all()
    rows = profile.set_index("stage")
    for stage in ("Vision encoder", "State and instruction encoders", "Action head"):
        assert rows.loc[stage, "kernel_ms"] > 0 and rows.loc[stage, "kernels"] >= 1
    whole = rows.loc["Whole inference"]
    parts = rows.drop("Whole inference")
    assert whole["kernels"] >= parts["kernels"].sum(), "whole inference encloses the stages"
    assert whole["kernel_ms"] >= 0.99 * parts["kernel_ms"].sum()
    assert (profile["cpu_op_ms"] <= profile["profiled_wall_ms"]).all(), "ops fit in their stage"


def test_gpu_is_marked_unavailable_on_cpu(profile):
    assert profile["gpu"].str.startswith("unavailable").all()
    assert profile["gpu_busy_pct"].isna().all() and profile["cuda_ms"].isna().all()
    assert profile["nvml_util_pct"].isna().all()
    assert (profile["kernel_ms"] == profile["cpu_op_ms"]).all()


def test_batches_and_paper_table(policy):
    df = profile_policy_batches(policy, [1, 2], image_size=32, repeats=2, warmup=1)
    assert sorted(df["batch_size"].unique()) == [1, 2]
    table = policy_stage_table(df)
    assert table.columns.tolist() == ["Wall (ms)", "Kernel time (ms)", "GPU busy (%)", "Kernels"]
    assert math.isnan(table.loc[(1, "Vision encoder"), "GPU busy (%)"])


def test_unloaded_policy_is_refused():
    with pytest.raises(ValueError, match="loaded"):
        profile_policy_stages(make_policy("vision", protocol="metaworld-v1"),
                              synthetic_observations(1, 16))
