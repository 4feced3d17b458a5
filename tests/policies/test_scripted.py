import numpy as np
import pytest

from workbench.plan import plan_episodes
from workbench.policies import make_policy
from workbench.policies.scripted import GRADED_LADDER, ScriptedExpert
from workbench.records import RecordStore
from workbench.runtime.sequential import evaluate_sequential


@pytest.fixture(scope="module")
def mt10():
    from workbench.benchmarks.metaworld import MetaWorldAdapter

    adapter = MetaWorldAdapter("MT10", image_size=32)
    yield adapter
    adapter.close()


def run(adapter, policy, tasks, episodes, tmp_path, name):
    plan = plan_episodes("metaworld", "MT10", tasks, episodes)
    store = RecordStore(tmp_path / f"{name}.sqlite")
    store.create_run("r", plan, {})
    return evaluate_sequential(adapter, policy, plan, store, "r", progress=False)


def test_graded_ladder_is_ordered_by_quality(mt10, tmp_path):
    tasks = ["reach-v3", "push-v3", "drawer-open-v3", "window-close-v3"]
    scores = []
    for i, defects in enumerate(GRADED_LADDER):
        df = run(mt10, ScriptedExpert(defects=defects), tasks, 3, tmp_path, f"p{i}")
        scores.append((df["success"].mean(), -df["steps"].mean()))
    assert scores == sorted(scores, reverse=True), scores


def test_graded_variants_are_seeded_and_reproducible(mt10, tmp_path):
    a = run(mt10, make_policy("expert", defect="noise", level=0.6), ["push-v3"], 2, tmp_path, "a")
    b = run(mt10, make_policy("expert", defect="noise", level=0.6), ["push-v3"], 2, tmp_path, "b")
    assert a["steps"].tolist() == b["steps"].tolist()
    c = run(mt10, make_policy("expert"), ["push-v3"], 2, tmp_path, "c")
    assert a["steps"].tolist() != c["steps"].tolist()


def test_stacked_defects_are_named_and_validated():
    assert ScriptedExpert(defects=()).name == "expert"
    assert ScriptedExpert(defects=[["noise", 0.1], ["delay", 0.5]]).name == "expert-noise-0.1+delay-0.5"
    with pytest.raises(ValueError, match="level must be in"):
        ScriptedExpert(defects=[("noise", 0.1), ("delay", 3)])


def test_expert_refuses_bad_defects_and_clips_actions():
    with pytest.raises(ValueError, match="unknown defect 'wobble'"):
        ScriptedExpert("wobble", 0.1)
    with pytest.raises(ValueError, match="level must be in"):
        ScriptedExpert("noise", 2.0)
