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
    with pytest.raises(ValueError, match="level: expected in"):
        ScriptedExpert(defects=[("noise", 0.1), ("delay", 3)])


def test_expert_refuses_bad_defects_and_clips_actions():
    with pytest.raises(ValueError, match="unknown defect 'wobble'"):
        ScriptedExpert("wobble", 0.1)
    with pytest.raises(ValueError, match="level: expected in"):
        ScriptedExpert("noise", 2.0)


def test_metaworlds_gain_warning_is_silenced_at_its_source_and_nowhere_else(tmp_path):
    import warnings

    import numpy as np
    from metaworld.policies.policy import move

    message = "Constant(s) may be too high. Environments clip response to [-1, 1]"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = workbench.run({"benchmark": "metaworld", "suite": "MT1:reach-v3", "policy": "expert",
                             "image_size": 32, "progress": False, "output_dir": str(tmp_path)})
        move(np.zeros(3), np.full(3, 10.0), p=10.0)  # MetaWorld's own expert code: silenced
        warnings.warn(message)  # the same words from anywhere else still warn
    assert run.results["success"].all()
    shown = [w for w in caught if str(w.message) == message]
    assert [w.filename for w in shown] == [__file__]
    ours = [f for f in warnings.filters if f[1] is not None and "Constant" in f[1].pattern]
    assert len(ours) <= 1 and all(f[3].pattern == r"metaworld\.policies\.policy" for f in ours)
