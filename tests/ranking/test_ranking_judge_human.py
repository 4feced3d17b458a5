"""Human annotation files: majority vote, unanimity, checks, replay as a judge."""

import pandas as pd
import pytest

from workbench.ranking.judges.base import RolloutRef
from workbench.ranking.agreement import majority_votes, unanimity_rate
from workbench.ranking.judges.human import HumanJudge, load_annotations
from workbench.ranking.metrics import agreement_rate


@pytest.fixture()
def csv_path(tmp_path):
    rows = [(1, "ann1", "A", "v1", "v2"), (1, "ann2", "A", "v1", "v2"), (1, "ann3", "B", "v1", "v2"),
            (2, "ann1", "b", "v3", "v4"), (2, "ann2", " B ", "v3", "v4"), (2, "ann3", "B", "v3", "v4"),
            (3, "ann1", "A", "v5", "v6"), (3, "ann2", "B", "v5", "v6")]
    path = tmp_path / "ann.csv"
    pd.DataFrame(rows, columns=["pair_id", "annotator", "choice", "video_a", "video_b"]).to_csv(
        path, index=False)
    return path


def test_majority_and_unanimity(csv_path):
    votes = majority_votes(load_annotations(csv_path)).set_index("pair_id")
    assert votes.loc[1, "majority"] == "v1" and not votes.loc[1, "unanimous"]
    assert votes.loc[2, "majority"] == "v4" and votes.loc[2, "unanimous"]
    assert votes.loc[3, "majority"] is None and votes.loc[3, "status"] == "tie"  # 1-1
    assert unanimity_rate(votes) == pytest.approx(1 / 3)


def test_human_judge_replays_votes_in_either_order(csv_path):
    judge = HumanJudge(load_annotations(csv_path))
    assert judge.compare(RolloutRef("v1"), RolloutRef("v2"), "t").winner == "A"
    assert judge.compare(RolloutRef("v2"), RolloutRef("v1"), "t").winner == "B"
    assert not judge.compare(RolloutRef("v5"), RolloutRef("v6"), "t").valid
    assert judge.compare(RolloutRef("v1"), RolloutRef("v9"), "t").raw == "not annotated"


def test_agreement_with_a_judge(csv_path):
    votes = majority_votes(load_annotations(csv_path))
    choices = [None if m is None else ("A" if m == x else "B")
               for m, x in zip(votes["majority"], votes["rollout_x"])]
    assert choices == ["A", "B", None]
    assert agreement_rate(["A", "A", "A"], choices) == pytest.approx(0.5)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.drop(columns="annotator"), "expected columns"),
    (lambda t: t.assign(choice="C"), "expected choice A or B"),
    (lambda t: pd.concat([t, t.iloc[:1]]), "twice"),
    (lambda t: t.assign(video_a=[f"x{k}" for k in range(len(t))]), "different videos"),
])
def test_bad_files_rejected(csv_path, edit, message):
    with pytest.raises(ValueError, match=message):
        load_annotations(edit(pd.read_csv(csv_path)))
