"""Franka Kitchen on real simulation: features, CALVIN-style chain counts, the scripted
light-switch-then-slide-cabinet diagnostic, renders only when read, and the same
outcomes whatever the worker or shard."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import workbench
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import validate_observation

pytest.importorskip("gymnasium_robotics", reason="gymnasium-robotics comes with the sims extra")

from workbench.benchmarks.kitchen import (CHAINS, KitchenAdapter, chain_length,  # noqa: E402
                                          recorded_chain_length)
from workbench.runtime.gym_env import CanonicalEnv  # noqa: E402

ADAPTER = "workbench.benchmarks.kitchen:KitchenAdapter"
SCRIPT = "workbench.policies.kitchen_scripted:KitchenLightSlide"
RUN = {"benchmark": ADAPTER, "suite": "pairs", "tasks": ["light-slide"], "image_size": 32,
       "progress": False, "max_steps": 120}
SCRIPT_STEPS = (60, 90)
"""Steps the script takes for light switch then slide cabinet (73 measured)."""


@pytest.mark.parametrize("completions, expected", [
    ([], 0),
    ([["microwave"]], 1),
    ([["microwave"], ["kettle"], ["light switch"], ["slide cabinet"]], 4),
    ([["kettle"], ["microwave"], ["light switch"]], 1),  # kettle before its turn
    ([["microwave"], ["light switch"], ["kettle"], ["slide cabinet"]], 2),
    ([["kettle", "light switch"], ["slide cabinet"]], 0),  # no microwave, nothing counts
    ([["kettle", "microwave"], [], ["slide cabinet", "light switch"]], 4),  # ties: any order
    ([["hinge cabinet"], ["microwave"], ["microwave"]], 1),  # other subtasks, repeats
    ([["microwave", "kettle"], ["light switch"], ["kettle"]], 3),
])
def test_chain_length_counts_subtasks_completed_in_a_row(completions, expected):
    chain = CHAINS["microwave-kettle-light-slide"]
    assert chain_length(chain, completions) == expected
    assert chain_length(chain, [s[::-1] for s in completions]) == expected  # order in a step
    assert chain_length(chain, [x for s in completions for x in ([], s)]) == expected


def test_features_follow_the_protocol_and_episodes_start_from_their_seed():
    workbench.contracts.rendering.use_headless_rendering()
    adapter = KitchenAdapter("pairs", image_size=32)
    try:
        names = ("images.primary", "state", "instruction", "privileged.state")
        adapter.reset(EpisodeSpec("kitchen", "pairs", "light-slide", 1, 1))
        first = adapter.observe(names)
        validate_observation(adapter.protocol, first, names)
        assert first["images.primary"].shape == (32, 32, 3) and first["images.primary"].std() > 5
        assert first["instruction"] == "turn on the light switch, then open the slide cabinet"
        np.testing.assert_array_equal(first["state"], first["privileged.state"][:18])
        adapter.reset(EpisodeSpec("kitchen", "pairs", "light-slide", 0, 0))
        other = adapter.observe(["privileged.state"])["privileged.state"]
        adapter.reset(EpisodeSpec("kitchen", "pairs", "light-slide", 1, 1))
        again = adapter.observe(["privileged.state"])["privileged.state"]
        np.testing.assert_array_equal(again, first["privileged.state"])
        assert 0 < np.abs(other - again).max() < 0.01  # only the seeded noise differs
        with pytest.raises(ValueError, match="no observation feature 'images.wrist'"):
            adapter.observe(["images.wrist"])
        with pytest.raises(ValueError, match="not in suite"):
            adapter.reset(EpisodeSpec("kitchen", "pairs", "light-switch", 0, 0))
    finally:
        adapter.close()
    with pytest.raises(ValueError, match="unknown kitchen suite 'x'; available"):
        KitchenAdapter("x")


def test_gymnasium_env_checker_passes():
    env = CanonicalEnv(KitchenAdapter("single"), "light-switch", ["state", "instruction"])
    check_env(env, skip_render_check=True)
    env.close()


def test_scripted_chain_succeeds_the_same_way_on_every_backend_and_shard(
        tmp_path, same_outcomes_everywhere):
    one = same_outcomes_everywhere({**RUN, "policy": SCRIPT, "episodes": 3}, tmp_path)
    assert one.results["success"].tolist() == [True, True, True]
    assert one.results["diagnostic"].all()
    assert all(SCRIPT_STEPS[0] < t < SCRIPT_STEPS[1] for t in one.results["terminal_step"])
    assert [recorded_chain_length(p) for p in one.results["rollout_path"]] == [2, 2, 2]


def test_subtasks_out_of_the_chains_order_do_not_count(tmp_path):
    class Completions(workbench.EpisodeObserver):
        info: dict = {}

        def after_step(self, adapter, step, action, result, seconds):
            Completions.info = result.info

    run = workbench.run({**RUN, "policy": SCRIPT, "suite": "d4rl",
                         "tasks": ["microwave-kettle-light-slide"], "max_steps": SCRIPT_STEPS[1],
                         "output_dir": str(tmp_path)}, observers=[Completions()])
    assert Completions.info["episode_task_completions"] == ["light switch", "slide cabinet"]
    assert Completions.info["chain_length"] == 0 and not run.results["success"].any()
    assert recorded_chain_length(run.results["rollout_path"][0]) == 0


def test_cameras_render_only_when_the_policy_reads(tmp_path, renders_per_run):
    steps, calls, renders = renders_per_run(RUN, tmp_path, protocol="kitchen-v1",
                                            features=("images.primary", "state"), chunk=4,
                                            steps=12)
    assert (steps, calls, renders) == (12, 3, 3)
