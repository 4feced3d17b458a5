import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from workbench.benchmarks import make_benchmark
from workbench.benchmarks.metaworld import MetaWorldAdapter, suite_tasks
from workbench.benchmarks.metaworld_tasks import MT10_TASKS, MT50_TASKS
from workbench.contracts import EpisodeSpec, validate_observation
from workbench.runtime.gym_env import CanonicalEnv

ALL = ["images.primary", "images.wrist", "state", "instruction", "privileged.state"]


def spec(i, task="pick-place-v3"):
    return EpisodeSpec("metaworld", "MT1:pick-place-v3", task, i, i)


def test_suites_and_refusals():
    assert len(suite_tasks("MT10")) == 10 and "pick-place-v3" in suite_tasks("MT10")
    assert MetaWorldAdapter.list_suites()[:2] == ["MT10", "MT50"]
    with pytest.raises(ValueError, match="unknown MetaWorld suite 'MT7'; available: MT10, MT50"):
        suite_tasks("MT7")


def test_observation_holds_exactly_the_requested_features(pick_place):
    pick_place.reset(spec(0))
    obs = pick_place.observe(ALL)
    assert set(obs) == set(ALL)
    validate_observation(pick_place.protocol, obs, tuple(ALL))
    assert obs["images.primary"].shape == (64, 64, 3)
    assert obs["state"].shape == (4,) and obs["privileged.state"].shape == (39,)
    np.testing.assert_array_equal(obs["state"], obs["privileged.state"][:4])
    assert set(pick_place.observe(["state"])) == {"state"}


def test_primary_camera_is_upright(pick_place):
    # the table (brown, lit) fills the lower half of the corner view once flipped
    pick_place.reset(spec(0))
    img = pick_place.observe(["images.primary"])["images.primary"].astype(float)
    top, bottom = img[:20].mean(axis=(0, 1)), img[-20:].mean(axis=(0, 1))
    assert top[0] - top[2] < bottom[0] - bottom[2] + 40  # not the upside-down render
    raw = pick_place._renderer("pick-place-v3")
    raw.update_scene(pick_place.mujoco_data(), camera="corner")
    np.testing.assert_array_equal(raw.render()[::-1], img.astype(np.uint8))


def test_initial_states_are_reproducible_and_distinct(pick_place):
    pick_place.reset(spec(1))
    a = pick_place.observe(["privileged.state"])["privileged.state"]
    pick_place.reset(spec(2))
    b = pick_place.observe(["privileged.state"])["privileged.state"]
    pick_place.reset(spec(1))
    c = pick_place.observe(["privileged.state"])["privileged.state"]
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)
    other = make_benchmark("metaworld", suite="MT1:pick-place-v3", image_size=64)  # a 2nd "worker"
    other.reset(spec(1))
    np.testing.assert_array_equal(a, other.observe(["privileged.state"])["privileged.state"])
    other.close()


def test_unknown_feature_and_task_are_refused(pick_place):
    pick_place.reset(spec(0))
    with pytest.raises(ValueError, match="no observation feature 'depth'"):
        pick_place.observe(["depth"])
    with pytest.raises(ValueError, match="not in suite"):
        pick_place.reset(spec(0, task="reach-v3"))


def test_gymnasium_env_checker_passes():
    adapter = make_benchmark("metaworld", suite="MT1:reach-v3", image_size=32)
    env = CanonicalEnv(adapter, "reach-v3", ["images.primary", "state", "instruction"],
                       image_size=32)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    env.close()


def test_task_lists_shipped_for_validation_match_the_installed_metaworld():
    from metaworld import env_dict

    assert list(MT10_TASKS) == list(env_dict.MT10_V3)
    assert list(MT50_TASKS) == list(env_dict.MT50_V3)


def test_gymnasium_view_steps_through_the_runtimes_loop_and_its_observers():
    from workbench.runtime.episode import RolloutRecorder

    adapter = make_benchmark("metaworld", suite="MT1:reach-v3", image_size=32)
    recorder = RolloutRecorder()
    env = CanonicalEnv(adapter, "reach-v3", ["state"], image_size=32, observers=[recorder])
    env.reset(options={"init_state_id": 0})
    for _ in range(3):
        env.step(np.zeros(4, np.float32))
    assert len(recorder.actions) == 3 and len(recorder.states) == 3
    env.close()
