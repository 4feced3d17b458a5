"""Automatic action replay (R2S-Eval Algorithm 1, Table I in kind) with real MuJoCo."""

import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("metaworld", reason="MetaWorld is not installed")

from workbench.contracts.capabilities import LoadContext  # noqa: E402
from workbench.contracts.plan import EpisodeSpec  # noqa: E402
from workbench.studies import action_replay as ar  # noqa: E402
from workbench.studies import reality_gap as rg  # noqa: E402
from workbench.studies import action_replay_table as t1  # noqa: E402
from workbench.studies.frame_replay import ReplayPolicy  # noqa: E402
from workbench.runtime.episode import RolloutRecorder, run_episode  # noqa: E402

GAP = rg.RealityGap(friction_scale=0.6, mass_scale=1.5, damping_scale=2.0,
                    pose_noise_m=0.01, pose_noise_rad=0.1)
CONFIG = ar.ReplayConfig(n_attempts=8, translation_m=0.01, yaw_rad=math.pi, seed=0)
SCALE_RTOL = 1e-12  # scaled model values are products of two doubles
NOISE_RTOL = 0.1  # sample std of 2,000 draws lies within 10% of the true one (about 6 sigma)
BIN_PICKING = "bin-picking-v3"  # a box: replays fail, retry, and sometimes recover
BIN_TRAJECTORIES = 5  # at seed 0: exhausted, recovered on a retry, and first-attempt successes


@pytest.fixture(scope="module")
def bin_picking():
    """Five real bin-picking runs and their replays, with the adapter that replayed them."""
    real = ar.record_real(BIN_PICKING, BIN_TRAJECTORIES, GAP, seed=CONFIG.seed)
    sim = rg.GapMetaWorldAdapter(f"MT1:{BIN_PICKING}", rg.RealityGap.none())
    outcomes = [ar.automatic_replay(sim, t, CONFIG) for t in real]
    yield real, outcomes, sim
    sim.close()


def _model(task, gap):
    adapter = rg.GapMetaWorldAdapter(f"MT1:{task}", gap)
    return adapter, adapter.environment(task).model


# -- the "real" world's dynamics -----------------------------------------------------------
def test_dynamics_gap_scales_the_model_and_nothing_else():
    nominal_adapter, nominal = _model("push-v3", rg.RealityGap.none())
    real_adapter, real = _model("push-v3", GAP)
    try:
        geoms, bodies = rg.object_geoms(nominal), rg.object_bodies(nominal)
        assert len(geoms) and len(bodies)
        np.testing.assert_allclose(real.geom_friction[geoms, 0],
                                   0.6 * nominal.geom_friction[geoms, 0], rtol=SCALE_RTOL)
        np.testing.assert_allclose(real.body_mass[bodies], 1.5 * nominal.body_mass[bodies],
                                   rtol=SCALE_RTOL)
        np.testing.assert_allclose(real.body_inertia[bodies],
                                   1.5 * nominal.body_inertia[bodies], rtol=SCALE_RTOL)
        damped = nominal.dof_damping > 0
        assert damped.sum() >= 9  # the arm's seven joints and two fingers
        np.testing.assert_allclose(real.dof_damping, 2.0 * nominal.dof_damping, rtol=SCALE_RTOL)
        others = np.setdiff1d(np.arange(nominal.ngeom), geoms)
        np.testing.assert_array_equal(real.geom_friction[others], nominal.geom_friction[others])
        rest = np.setdiff1d(np.arange(nominal.nbody), bodies)
        np.testing.assert_array_equal(real.body_mass[rest], nominal.body_mass[rest])
    finally:
        nominal_adapter.close()
        real_adapter.close()


def test_dynamics_are_scaled_once_not_at_every_reset():
    adapter, model = _model("push-v3", GAP)
    try:
        before = model.body_mass.copy()
        for init_id in range(2):
            adapter.reset(EpisodeSpec("metaworld", adapter.suite, "push-v3", init_id, init_id))
        np.testing.assert_array_equal(adapter.environment("push-v3").model.body_mass, before)
    finally:
        adapter.close()


def test_a_task_without_a_free_object_is_refused():
    adapter = rg.GapMetaWorldAdapter("MT1:drawer-open-v3", GAP)
    try:
        with pytest.raises(ValueError, match="no free object"):
            adapter.environment("drawer-open-v3")
    finally:
        adapter.close()


def test_yaw_invariance_follows_the_object_shape():
    for task, expected in (("push-v3", True), ("bin-picking-v3", False)):
        adapter, model = _model(task, rg.RealityGap.none())
        try:
            assert rg.yaw_invariant(model) is expected, task
        finally:
            adapter.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"friction_scale": 0.0}, "friction_scale: expected a finite number > 0"),
    ({"damping_scale": float("nan")}, "damping_scale: expected a finite number > 0"),
    ({"pose_noise_m": -0.01}, "pose_noise_m: expected a finite number >= 0"),
])
def test_reality_gap_refuses_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rg.RealityGap(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"n_attempts": 0}, "n_attempts: expected an integer >= 1"),
    ({"n_attempts": 2.5}, "n_attempts: expected an integer >= 1"),
    ({"translation_m": -1.0}, "translation_m: expected a finite number >= 0"),
    ({"yaw_rad": float("inf")}, "yaw_rad: expected a finite number >= 0"),
])
def test_replay_config_refuses_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ar.ReplayConfig(**kwargs)


# -- poses ---------------------------------------------------------------------------------
def test_pose_estimate_noise_has_the_configured_scale_and_is_seeded():
    true = rg.ObjectPose(0.05, 0.6, 0.3)
    rng = np.random.default_rng(7)
    errors = np.array([ar.estimate_pose(true, GAP, rng).as_array() - true.as_array()
                       for _ in range(2000)])
    np.testing.assert_allclose(errors.std(axis=0), [0.01, 0.01, 0.1], rtol=NOISE_RTOL)
    assert np.all(np.abs(errors.mean(axis=0)) < 0.1 * np.array([0.01, 0.01, 0.1]))
    again = ar.estimate_pose(true, GAP, np.random.default_rng(7))
    assert again == ar.estimate_pose(true, GAP, np.random.default_rng(7))
    assert again != ar.estimate_pose(true, GAP, np.random.default_rng(8))


def test_recorded_estimates_differ_from_true_poses_by_the_noise(bin_picking):
    real, _, _ = bin_picking
    errors = np.array([t.estimated_pose.as_array() - t.true_pose.as_array() for t in real])
    assert np.all(errors != 0)
    assert np.all(np.abs(errors) < 5 * np.array([0.01, 0.01, 0.1]))  # 5 sigma
    rerun = ar.record_real(BIN_PICKING, 2, GAP, seed=CONFIG.seed)
    assert [t.estimated_pose for t in rerun] == [t.estimated_pose for t in real[:2]]
    exact = ar.record_real(BIN_PICKING, 2, GAP.dynamics_only, seed=CONFIG.seed)
    assert all(t.estimated_pose == t.true_pose for t in exact)


def test_place_object_puts_the_object_at_the_pose():
    adapter = rg.GapMetaWorldAdapter("MT1:bin-picking-v3")
    try:
        pose = rg.ObjectPose(-0.05, 0.68, 2.5)
        adapter.object_pose = pose
        adapter.reset(EpisodeSpec("metaworld", adapter.suite, BIN_PICKING, 0, 0))
        placed = rg.read_object_pose(adapter.environment(BIN_PICKING))
        np.testing.assert_allclose(placed.as_array(), pose.as_array(), atol=1e-9)
        obs = adapter.observe(["privileged.state"])["privileged.state"]
        np.testing.assert_allclose(obs[4:6], [pose.x, pose.y], atol=1e-6)  # the policy sees it
    finally:
        adapter.close()


# -- replay --------------------------------------------------------------------------------
def test_replay_without_any_gap_reproduces_the_recording_exactly():
    task = "push-v3"
    real = ar.record_real(task, 3, rg.RealityGap.none(), seed=0)
    sim = rg.GapMetaWorldAdapter(f"MT1:{task}", rg.RealityGap.none())
    try:
        for t in real:
            assert t.estimated_pose == t.true_pose
            outcome = ar.automatic_replay(sim, t, CONFIG)
            assert outcome.first_attempt == t.real_success
            assert outcome.attempts == (1 if t.real_success else 0)
            policy = ReplayPolicy(t.rollout, sim.protocol.name)
            policy.load(LoadContext(sim.protocol.name))
            recorder = RolloutRecorder()
            sim.object_pose = t.estimated_pose
            run_episode(sim, policy, EpisodeSpec("metaworld", sim.suite, task, t.init_id,
                                                 t.init_id),
                        observe_every_step=False, observers=[recorder],
                        max_steps=t.rollout.steps)
            np.testing.assert_array_equal(recorder.rollout().state, t.rollout.state)
        assert any(t.real_success for t in real)
    finally:
        sim.close()


def test_retries_follow_failures_only_and_stop_at_the_first_success(bin_picking):
    real, outcomes, sim = bin_picking
    assert {o.attempts for o in outcomes} >= {1, CONFIG.n_attempts}  # both ends occur
    assert any(o.within_n and not o.first_attempt for o in outcomes)  # a retry recovered
    for t, o in zip(real, outcomes):
        assert 1 <= o.attempts <= CONFIG.n_attempts
        assert o.offsets.shape == (o.attempts, 3)
        assert o.first_attempt == (o.within_n and o.attempts == 1)
        # replay each attempt again: every one before the last failed, the last decides
        results = [ar.replay_attempt(sim, t, t.estimated_pose.offset(d)) for d in o.offsets]
        assert not any(results[:-1])
        assert results[-1] == o.within_n


def test_retry_loop_counts_with_scripted_outcomes(bin_picking, monkeypatch):
    real, _, sim = bin_picking
    for script, attempts, within in (([False, False, True], 3, True), ([True], 1, True),
                                     ([False] * 8, 8, False)):
        calls = iter(script)
        monkeypatch.setattr(ar, "replay_attempt", lambda *a, calls=calls: next(calls))
        o = ar.automatic_replay(sim, real[0], CONFIG)
        assert (o.attempts, o.within_n, o.first_attempt) == (attempts, within, attempts == 1)
        assert next(calls, "spent") == "spent"  # no attempt after the first success


def test_offsets_stay_within_bounds_and_start_at_zero():
    config = ar.ReplayConfig(n_attempts=200, translation_m=0.01, yaw_rad=0.5)
    offsets = ar.replay_offsets(config, np.random.default_rng(3))
    assert offsets.shape == (200, 3)
    np.testing.assert_array_equal(offsets[0], 0.0)
    assert np.all(np.abs(offsets[1:, :2]) <= 0.01) and np.all(np.abs(offsets[1:, 2]) <= 0.5)
    assert np.abs(offsets[1:, :2]).max() > 0.009 and np.abs(offsets[1:, 2]).max() > 0.45


def test_a_real_failure_is_not_replayed_unless_asked(bin_picking, monkeypatch):
    real, _, sim = bin_picking
    failed = ar.RealTrajectory(**{**real[0].__dict__, "real_success": False})
    monkeypatch.setattr(ar, "replay_attempt", lambda *a: False)
    assert ar.automatic_replay(sim, failed, CONFIG).attempts == 0
    asked = ar.ReplayConfig(replay_real_failures=True)
    assert ar.automatic_replay(sim, failed, asked).attempts == asked.n_attempts


# -- Table I -------------------------------------------------------------------------------
def test_table_one_matches_the_rows(bin_picking):
    _, outcomes, _ = bin_picking
    extra = ar.ReplayOutcome("push-v3", 0, True, True, True, 1, np.zeros((1, 3)))
    skipped = ar.ReplayOutcome("push-v3", 1, False, False, False, 0, np.zeros((0, 3)))
    rows = pd.DataFrame([o.row() for o in [*outcomes, extra, skipped]])
    table = t1.table_one(rows).set_index("task")
    assert list(table.index) == [BIN_PICKING, "push-v3", "Total / Avg."]
    bins = [o for o in outcomes]
    assert table.loc[BIN_PICKING, "trajectories"] == len(bins)
    assert table.loc[BIN_PICKING, "replay_first_attempt"] == pytest.approx(
        sum(o.first_attempt for o in bins) / len(bins))
    assert table.loc[BIN_PICKING, "replay_within_n"] == pytest.approx(
        sum(o.within_n for o in bins) / len(bins))
    assert table.loc[BIN_PICKING, "mean_attempts"] == pytest.approx(
        sum(o.attempts for o in bins) / len(bins))
    assert table.loc["push-v3", "real_success_rate"] == 0.5
    assert table.loc["push-v3", "mean_attempts"] == 1.0  # the unreplayed failure is left out
    everyone = [*bins, extra]
    assert table.loc["Total / Avg.", "trajectories"] == len(bins) + 2
    assert table.loc["Total / Avg.", "replay_within_n"] == pytest.approx(
        sum(o.within_n for o in everyone) / len(everyone))


def test_action_replay_rows_are_reproducible_and_plot():
    import matplotlib

    matplotlib.use("Agg")
    one = ar.action_replay_rows(["pick-place-v3"], 2, GAP, CONFIG)
    two = ar.action_replay_rows(["pick-place-v3"], 2, GAP, CONFIG)
    pd.testing.assert_frame_equal(one, two)
    assert set(one.columns) >= {"task", "real_success", "first_attempt", "within_n",
                                "attempts", "offsets", "position_error_m", "yaw_invariant"}
    fig, ax = t1.plot_table_one(t1.table_one(one))
    assert len(ax.texts) == 2 * 3  # one task and the total, three rates each
