"""Simulator-stage profiles on real MuJoCo (MetaWorld reach, 64 px, short episodes)."""

import math

import mujoco
import numpy as np
import pytest

from workbench.benchmarks.metaworld import MetaWorldAdapter
from workbench.plan import plan_episodes
from workbench.policies import LoadContext, make_policy
from workbench.profiling import (
    SIM_STAGES,
    compare_render_schedules,
    mujoco_timers,
    mujoco_timing,
    profile_sim_stages,
    sim_stage_table,
)

SHARE_TOLERANCE = 1e-9
MAX_STEPS = 16
CHUNK = 8
FEATURES = ("images.primary", "state", "instruction", "privileged.state")


@pytest.fixture(scope="module")
def adapter():
    adapter = MetaWorldAdapter("MT1:reach-v3", image_size=64)
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
    return compare_render_schedules(adapter, episodes, policy, render_every=(1, CHUNK),
                                    features=FEATURES, max_steps=MAX_STEPS)


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
    for every, rows in schedules.groupby("render_every"):
        assert rows["stage"].tolist() == list(SIM_STAGES)
        assert math.isclose(rows["share"].sum(), 1.0, abs_tol=SHARE_TOLERANCE)
        assert (rows["total_s"] >= 0).all() and (rows["steps"] == MAX_STEPS).all()
        by_stage = rows.set_index("stage")
        assert by_stage.loc["Rendering", "per_step_ms"] > 0
        assert by_stage.loc["Robot control and forward kinematics", "total_s"] > 0
        assert by_stage.loc["Physics integration", "total_s"] > 0
        assert by_stage.loc["Episode reset", "calls"] == 1


def test_metaworld_step_counts_match_its_frame_skip(schedules, adapter):
    rows = schedules[schedules["render_every"] == 1].set_index("stage")
    frame_skip = adapter._env.frame_skip
    # mj_step's integrator runs frame_skip times per env step; mj_forward once more
    assert rows.loc["Physics integration", "calls_per_step"] == frame_skip
    assert rows.loc["Robot control and forward kinematics", "calls_per_step"] == frame_skip + 1


def test_rendering_at_chunk_boundaries_renders_a_chunk_fewer_frames(schedules):
    renders = schedules[schedules["stage"] == "Rendering"].set_index("render_every")["calls"]
    assert renders[1] == MAX_STEPS
    assert renders[CHUNK] == MAX_STEPS // CHUNK
    table = sim_stage_table(schedules)
    assert table.loc["Rendering", f"render_every={CHUNK}"] < table.loc["Rendering",
                                                                       "render_every=1"]
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
    with pytest.raises(ValueError, match="render_every"):
        profile_sim_stages(adapter, episodes, policy, render_every=-1)
