import pytest

import workbench
from workbench.policies.scripted import GRADED_LADDER, ScriptedExpert


def run(tasks, episodes, tmp_path, name, **options):
    return workbench.run(dict(benchmark="metaworld", suite="MT10", tasks=tasks,
                              episodes=episodes, policy="expert", policy_options=options,
                              image_size=32, progress=False, output_dir=str(tmp_path),
                              run_id=name)).results


def test_graded_ladder_is_ordered_by_quality(tmp_path):
    tasks = ["reach-v3", "push-v3", "drawer-open-v3", "window-close-v3"]
    scores = []
    for i, defects in enumerate(GRADED_LADDER):
        df = run(tasks, 3, tmp_path, f"p{i}", defects=[list(d) for d in defects])
        scores.append((df["success"].mean(), -df["steps"].mean()))
    assert scores == sorted(scores, reverse=True), scores


def test_graded_variants_are_seeded_and_reproducible(tmp_path):
    a = run(["push-v3"], 2, tmp_path, "a", defect="noise", level=0.6)
    b = run(["push-v3"], 2, tmp_path, "b", defect="noise", level=0.6)
    assert a["steps"].tolist() == b["steps"].tolist()
    c = run(["push-v3"], 2, tmp_path, "c")
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
