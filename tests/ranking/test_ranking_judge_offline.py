"""Rollout files and the offline heuristic judge on synthesized episodes."""

import numpy as np
import pytest

from workbench.ranking.judges.base import Judge, RolloutRef
from workbench.ranking.judges.offline import HEURISTIC_LABEL, OfflineJudge, assess
from workbench.ranking.judges.prompts import SECTION_TITLES
from workbench.ranking.synthetic import synthetic_rollout
from workbench.records.rollout import Rollout, load_rollout, save_rollout


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rollouts")
    out = {}
    for kind in ("smooth", "jerky", "hesitant", "chattering"):
        for success in (True, False):
            name = f"{kind}_{'ok' if success else 'fail'}"
            save_rollout(synthetic_rollout(kind, success, seed=3), folder / f"{name}.npz")
            out[name] = RolloutRef(name, path=str(folder / f"{name}.npz"))
    return out


def test_round_trip_and_sibling_video(tmp_path):
    ro = synthetic_rollout("smooth", seed=1)
    save_rollout(ro, tmp_path / "ep.npz")
    (tmp_path / "ep.mp4").write_bytes(b"")
    back = load_rollout(tmp_path / "ep.npz")
    np.testing.assert_array_equal(back.state, ro.state)
    assert back.actions.dtype == np.float32 and back.success.dtype == np.bool_
    assert back.video == str(tmp_path / "ep.mp4") and back.path == str(tmp_path / "ep.npz")


def test_video_entry_in_npz_wins(tmp_path):
    ro = synthetic_rollout("smooth", seed=1)
    save_rollout(Rollout(ro.actions, ro.state, ro.success, ro.reward, video="/data/x.mp4"),
                 tmp_path / "ep.npz")
    assert load_rollout(tmp_path / "ep.npz").video == "/data/x.mp4"


@pytest.mark.parametrize("change, message", [
    ({"state": np.zeros((5, 4), np.float32)}, "state: expected shape"),
    ({"actions": np.zeros(60, np.float32)}, "actions and state: expected 2-D"),
    ({"success": np.zeros(59, bool)}, "success: expected shape"),
    ({"success": np.zeros(60, np.int64)}, "success: expected bool"),
    ({"reward": np.full(60, np.nan, np.float32)}, "NaN"),
])
def test_malformed_files_rejected(tmp_path, change, message):
    ro = synthetic_rollout("smooth", seed=1)
    arrays = {"actions": ro.actions, "state": ro.state, "success": ro.success, "reward": ro.reward}
    np.savez(tmp_path / "bad.npz", **{**arrays, **change})
    with pytest.raises(ValueError, match=message):
        load_rollout(tmp_path / "bad.npz")


def test_the_judge_needs_end_effector_and_gripper_columns():
    ro = synthetic_rollout("smooth", seed=1)
    narrow = Rollout(ro.actions, ro.state[:, :2], ro.success, ro.reward)
    with pytest.raises(ValueError, match=r"\(4 state columns\); this rollout has 2"):
        assess(narrow)


def test_missing_arrays_named(tmp_path):
    np.savez(tmp_path / "bad.npz", actions=np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"missing arrays \['reward', 'state', 'success'\]"):
        load_rollout(tmp_path / "bad.npz")


def test_criteria_separate_the_synthetic_kinds():
    q = {k: assess(synthetic_rollout(k, True, seed=3)) for k in
         ("smooth", "jerky", "hesitant", "chattering")}
    assert q["smooth"].smoothness > 0.8 > 0.2 > q["jerky"].smoothness
    assert q["hesitant"].pauses == 2 and q["smooth"].pauses == 0
    assert q["jerky"].reversals > 10 and q["smooth"].reversals == 0
    assert q["chattering"].gripper_toggles > 10 and q["chattering"].effort < 0.2
    assert all(x.succeeded for x in q.values())


def test_preferences_follow_quality(refs):
    judge = OfflineJudge()
    assert isinstance(judge, Judge)
    for worse in ("jerky_ok", "hesitant_ok", "chattering_ok", "smooth_fail"):
        assert judge.compare(refs["smooth_ok"], refs[worse], "lift").winner == "A"
        assert judge.compare(refs[worse], refs["smooth_ok"], "lift").winner == "B"
    assert judge.compare(refs["jerky_ok"], refs["smooth_fail"], "lift").winner == "A"
    assert judge.compare(refs["smooth_fail"], refs["jerky_fail"], "lift").winner == "A"


def test_description_format_and_label(refs):
    pref = OfflineJudge().compare(refs["hesitant_fail"], refs["smooth_ok"], "lift")
    for k, title in enumerate(SECTION_TITLES, start=1):
        assert f"Section {k}: {title}" in pref.description_a
    assert "partially successful" in pref.description_a
    assert "Final outcome: successful" in pref.description_b
    assert HEURISTIC_LABEL in pref.description_a
    assert "not a VLM" in OfflineJudge.description


def test_ties_broken_by_stable_seeded_coin(refs):
    same = RolloutRef("other", path=refs["smooth_ok"].path)
    first = [OfflineJudge(seed=s).compare(refs["smooth_ok"], same, "t").winner for s in range(16)]
    again = [OfflineJudge(seed=s).compare(refs["smooth_ok"], same, "t").winner for s in range(16)]
    assert first == again and set(first) == {"A", "B"}


def test_rollouts_assessed_once(refs):
    judge = OfflineJudge()
    for _ in range(3):
        judge.compare(refs["smooth_ok"], refs["jerky_ok"], "t")
    assert judge.stats.describe_calls == 2 and judge.stats.cache_hits == 4


def test_needs_a_path():
    with pytest.raises(ValueError, match="no .npz path"):
        OfflineJudge().compare(RolloutRef("a"), RolloutRef("b"), "t")


def test_unknown_synthetic_kind():
    with pytest.raises(ValueError, match="unknown rollout kind"):
        synthetic_rollout("wobbly")


def test_progress_scales_metaworld_rewards_instead_of_saturating():
    ro = synthetic_rollout("smooth", success=False, seed=2)
    partial = Rollout(ro.actions, ro.state, ro.success, np.linspace(0, 3.0, len(ro.reward),
                                                                      dtype=np.float32))
    further = Rollout(ro.actions, ro.state, ro.success, np.linspace(0, 7.0, len(ro.reward),
                                                                      dtype=np.float32))
    assert assess(partial).progress == assess(further).progress == 1.0  # unscaled: saturated
    assert assess(partial, reward_scale=10.0).progress == pytest.approx(0.3)
    assert assess(further, reward_scale=10.0).progress == pytest.approx(0.7)
    with pytest.raises(ValueError, match="reward_scale: expected > 0"):
        OfflineJudge(reward_scale=0)
