"""Simulator-stage profiles on real MuJoCo (MetaWorld reach, 64 px, short episodes)."""

import math

import mujoco
import numpy as np
import pytest

from workbench.benchmarks import make_benchmark
from workbench.contracts import LoadContext, plan_episodes
from workbench.policies import make_policy
from workbench.profiling import (
    SIM_STAGES,
    compare_observe_schedules,
    mujoco_timers,
    mujoco_timing,
    profile_sim_stages,
    sim_stage_table,
)

SHARE_TOLERANCE = 1e-9
MAX_STEPS = 16
CHUNK = 8


@pytest.fixture(scope="module")
def adapter():
    adapter = make_benchmark("metaworld", suite="MT1:reach-v3", image_size=64)
    yield adapter
    adapter.close()


@pytest.fixture(scope="module")
def policy():
    policy = make_policy("expert-vision-cost", chunk_size=CHUNK, cameras=("images.primary",))
    policy.load(LoadContext("metaworld-v1"))
    return policy


@pytest.fixture(scope="module")
def schedules(adapter, policy):
    episodes = plan_episodes("metaworld", "MT1:reach-v3", ["reach-v3"], 1)
    return compare_observe_schedules(adapter, episodes, policy, max_steps=MAX_STEPS)


def test_timers_only_measure_durations_with_a_callback():
    model = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>")
    data = mujoco.MjData(model)
    for _ in range(20):
        mujoco.mj_step(model, data)
    untimed = mujoco_timers(data).set_index("timer")
    assert untimed.loc["STEP", "number"] == 20 and untimed["duration_s"].sum() == 0
    mujoco.mj_resetData(model, data)
    with mujoco_timing():
        for _ in range(20):
            mujoco.mj_step(model, data)
    assert mujoco.get_mjcb_time() is None, "the callback is removed afterwards"
    timed = mujoco_timers(data).set_index("timer")
    assert timed.loc["STEP", "duration_s"] > 0
    assert timed.loc["FORWARD", "duration_s"] <= timed.loc["STEP", "duration_s"]


def test_every_stage_is_present_with_shares_summing_to_one(schedules):
    for _, rows in schedules.groupby("observe"):
        assert rows["stage"].tolist() == list(SIM_STAGES)
        assert math.isclose(rows["share"].sum(), 1.0, abs_tol=SHARE_TOLERANCE)
        assert (rows["total_s"] >= 0).all() and (rows["steps"] == MAX_STEPS).all()
        by_stage = rows.set_index("stage")
        assert by_stage.loc["Rendering", "per_step_ms"] > 0
        assert by_stage.loc["Robot control and forward kinematics", "total_s"] > 0
        assert by_stage.loc["Physics integration", "total_s"] > 0
        assert by_stage.loc["Episode reset", "calls"] == 1


def test_metaworld_step_counts_match_its_frame_skip(schedules, adapter):
    rows = schedules[schedules["observe"] == "every_step"].set_index("stage")
    frame_skip = adapter._env.frame_skip
    # mj_step's integrator runs frame_skip times per env step; mj_forward once more
    assert rows.loc["Physics integration", "calls_per_step"] == frame_skip
    assert rows.loc["Robot control and forward kinematics", "calls_per_step"] == frame_skip + 1


def test_rendering_at_chunk_boundaries_renders_a_chunk_fewer_frames(schedules):
    renders = schedules[schedules["stage"] == "Rendering"].set_index("observe")["calls"]
    assert renders["every_step"] == MAX_STEPS
    assert renders["chunk_boundary"] == MAX_STEPS // CHUNK
    table = sim_stage_table(schedules)
    assert table.loc["Rendering", "observe=chunk_boundary"] < table.loc["Rendering",
                                                                        "observe=every_step"]
    assert np.isclose(table.loc["Simulator total"].sum(), schedules["total_s"].sum())


def test_no_camera_means_no_rendering(adapter):
    policy = make_policy("expert")
    policy.load(LoadContext("metaworld-v1"))
    episodes = plan_episodes("metaworld", "MT1:reach-v3", ["reach-v3"], 1)
    df = profile_sim_stages(adapter, episodes, policy, max_steps=4).set_index("stage")
    assert df.loc["Rendering", "total_s"] == 0 and df.loc["Rendering", "calls"] == 0
    assert policy.state.value == "Loaded", "episodes are ended"


def test_bad_settings_are_refused(adapter, policy):
    with pytest.raises(ValueError, match="at least one episode"):
        profile_sim_stages(adapter, [], policy)
    episodes = plan_episodes("metaworld", "MT1:reach-v3", ["reach-v3"], 1)
    with pytest.raises(ValueError, match="observe: expected one of"):
        profile_sim_stages(adapter, episodes, policy, observe="sometimes")


def test_the_profiler_watches_the_runtimes_step_loop_and_excludes_policy_time(adapter, policy):
    episodes = plan_episodes("metaworld", "MT1:reach-v3", ["reach-v3"], 1)
    df = profile_sim_stages(adapter, episodes, policy, max_steps=MAX_STEPS)
    assert df.attrs["policy_s"] > 0  # the vision network ran, and is not in any stage
    assert df["steps"].iloc[0] == MAX_STEPS
