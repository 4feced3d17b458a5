"""Agreement among annotators and with the human majority: majority and unanimity rules,
Fleiss' kappa against the textbook case, Cohen's kappa by hand, and file loading."""

import json

import numpy as np
import pandas as pd
import pytest

from workbench.ranking.agreement import (agreement_with_majority, annotation_summary,
                                         fleiss_kappa, judge_agreement_table,
                                         load_annotation_files, majority_votes, rating_counts,
                                         unanimity_rate)
from workbench.ranking.judges.base import RolloutRef
from workbench.ranking.judges.human import HumanJudge

KAPPA_TOL = 1e-3  # the textbook prints kappa to three decimals
EXACT = 1e-12

# Fleiss (1971) as worked on Wikipedia ("Fleiss' kappa", worked example): 10 subjects,
# 14 raters each, 5 categories; P-bar = 0.378, P_e = 0.213, kappa = 0.210.
WIKIPEDIA = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
             [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
             [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def answer(annotator, pair_id, shown_a, shown_b, choice):
    return {"annotator": annotator, "pair_id": pair_id, "shown_a": shown_a, "shown_b": shown_b,
            "choice": choice, "timestamp": "t"}


def five_pairs():
    """Three annotators on pairs 0-4 (rollouts u<v); ben always sees them swapped.
    Preferred: 0: u,u,u  1: u,v,u  2: u,v,-  3: u,-,-  4: -,-,-  (- = invalid)."""
    plan = {0: ("A", "B", "A"), 1: ("A", "A", "A"), 2: ("A", "A", "invalid"),
            3: ("A", "invalid", "invalid"), 4: ("invalid",) * 3}
    rows = []
    for pair, (ana, ben, cai) in plan.items():
        u, v = f"u{pair}", f"v{pair}"
        rows += [answer("ana", pair, u, v, ana), answer("ben", pair, v, u, ben),
                 answer("cai", pair, u, v, cai)]
    return pd.DataFrame(rows)


def test_fleiss_kappa_matches_the_textbook_example():
    assert abs(fleiss_kappa(WIKIPEDIA) - 0.210) < KAPPA_TOL
    assert fleiss_kappa([[3, 0], [0, 3]]) == 1.0  # perfect agreement
    assert abs(fleiss_kappa([[2, 1], [1, 2]]) - (-1 / 3)) < EXACT  # P = 1/3, Pe = 1/2
    assert np.isnan(fleiss_kappa([[3, 0], [3, 0]]))  # one category only: undefined
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[3, 0], [1, 1]])


def test_majority_ties_invalid_and_unanimity_by_rule():
    votes = majority_votes(five_pairs()).set_index("pair_id")
    assert votes["status"].tolist() == ["majority", "majority", "tie", "invalid", "invalid"]
    assert votes["majority"].tolist() == ["u0", "u1", None, None, None]
    assert votes["unanimous"].tolist() == [True, False, False, False, False]
    assert votes.loc[1, ["votes_x", "votes_y", "invalid"]].tolist() == [2, 1, 0]
    assert unanimity_rate(votes) == 0.2
    summary = annotation_summary(five_pairs())
    assert {k: summary[k] for k in ("annotators", "pairs", "majority", "tie", "invalid",
                                    "unanimous_pairs", "invalid_answers")} == {
        "annotators": 3, "pairs": 5, "majority": 2, "tie": 1, "invalid": 2,
        "unanimous_pairs": 1, "invalid_answers": 6}
    # counts [3,0,0] [2,1,0] [1,1,1] [1,0,2] [0,0,3]: P = 8/15, Pe = 89/225 -> 31/136
    assert rating_counts(five_pairs()).tolist() == [[3, 0, 0], [2, 1, 0], [1, 1, 1],
                                                    [1, 0, 2], [0, 0, 3]]
    assert abs(summary["fleiss_kappa"] - 31 / 136) < EXACT and summary["fleiss_pairs"] == 5


def test_fleiss_uses_only_pairs_every_annotator_answered():
    answers = five_pairs()
    answers = answers[~((answers["annotator"] == "cai") & (answers["pair_id"] == 4))]
    assert rating_counts(answers).tolist()[-1] == [1, 0, 2]  # pair 4 dropped
    assert annotation_summary(answers)["fleiss_pairs"] == 4


def test_cohen_kappa_and_raw_agreement_against_a_hand_computed_table():
    # 10 pairs: both x 5, both y 3, judge x / human y 1, judge y / human x 1
    # po = 0.8, pe = 0.6 * 0.6 + 0.4 * 0.4 = 0.52, kappa = 0.28 / 0.48
    human = ["x"] * 5 + ["y"] * 3 + ["y", "x"]
    judge = ["x"] * 5 + ["y"] * 3 + ["x", "y"]
    votes = pd.DataFrame({"pair_id": range(10), "rollout_x": [f"a{k}" for k in range(10)],
                          "rollout_y": [f"b{k}" for k in range(10)]})
    votes["majority"] = [f"{'a' if h == 'x' else 'b'}{k}" for k, h in enumerate(human)]
    preferred = {k: f"{'a' if j == 'x' else 'b'}{k}" for k, j in enumerate(judge)}
    preferred[3] = None  # an invalid judge answer is left out...
    votes.loc[10] = [10, "a10", "b10", None]  # ...and so is a pair without a majority
    got = agreement_with_majority(votes, preferred | {10: "a10"})
    assert got["n_pairs"] == 9
    # pair 3 was both-x: without it po = 7/9, pe = (5/9)^2 + (4/9)^2
    po, pe = 7 / 9, (5 / 9) ** 2 + (4 / 9) ** 2
    assert abs(got["agreement"] - po) < EXACT
    assert abs(got["cohen_kappa"] - (po - pe) / (1 - pe)) < EXACT
    preferred[3] = "a3"
    full = agreement_with_majority(votes.iloc[:10], preferred)
    assert abs(full["agreement"] - 0.8) < EXACT and abs(full["cohen_kappa"] - 0.28 / 0.48) < EXACT


def test_judge_agreement_table_rows_for_annotators_and_judges():
    answers = five_pairs()
    table = judge_agreement_table(answers, {"always-u": {k: f"u{k}" for k in range(5)},
                                      "always-v": {k: f"v{k}" for k in range(5)}})
    assert list(table.index) == ["ana", "ben", "cai", "always-u", "always-v"]
    assert table["kind"].tolist() == ["annotator"] * 3 + ["judge"] * 2
    assert table.loc["always-u", ["n_pairs", "agreement"]].tolist() == [2, 1.0]
    assert table.loc["always-v", "agreement"] == 0.0
    assert table.loc["ben", ["n_pairs", "agreement"]].tolist() == [2, 0.5]  # sees v, u: B is u
    assert np.isnan(table.loc["always-u", "cohen_kappa"])  # both sides always x: undefined


def test_the_human_judge_replays_the_one_majority_vote_over_valid_answers():
    answers = five_pairs()
    judge = HumanJudge(answers)
    assert judge.compare(RolloutRef("v0"), RolloutRef("u0"), "t").winner == "B"
    assert judge.compare(RolloutRef("u1"), RolloutRef("v1"), "t").winner == "A"
    assert judge.compare(RolloutRef("u4"), RolloutRef("v4"), "t").winner is None  # all invalid
    # the judge counts valid answers only: pair 3's one answer for u decides it (the
    # annotators' majority_votes, counting "invalid" too, call the pair invalid)
    assert judge.compare(RolloutRef("u3"), RolloutRef("v3"), "t").winner == "A"


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_loading_files_checks_across_files(tmp_path):
    answers = five_pairs()
    paths = [write(tmp_path / f"{name}.jsonl", part.to_dict("records"))
             for name, part in answers.groupby("annotator")]
    loaded = load_annotation_files(paths)
    assert len(loaded) == 15 and loaded["source"].nunique() == 3
    assert majority_votes(loaded)["status"].tolist() == majority_votes(answers)["status"].tolist()
    again = write(tmp_path / "ana-again.jsonl", [answer("ana", 0, "u0", "v0", "B")])
    with pytest.raises(ValueError, match=r"'ana' answered pair 0 in more than one file: .*ana-again"):
        load_annotation_files(paths + [again])
    other = write(tmp_path / "dan.jsonl", [answer("dan", 0, "u0", "w0", "A")])
    with pytest.raises(ValueError, match="pair 0 shows different rollouts"):
        load_annotation_files(paths + [other])
    bad = write(tmp_path / "eve.jsonl", [answer("eve", 0, "u0", "v0", "A"),
                                         answer("eve", 1, "u1", "v1", "left")])
    with pytest.raises(ValueError, match="eve.jsonl: line 2: choice: expected one of"):
        load_annotation_files(paths + [bad])
    with pytest.raises(ValueError, match="no annotation files"):
        load_annotation_files([])


def test_answers_of_another_sample_are_refused():
    from workbench.ranking.agreement import check_sample

    answers = five_pairs().assign(source="ana.jsonl")
    pairs = pd.DataFrame({"pair_id": range(5), "rollout_a": [f"v{k}" for k in range(5)],
                          "rollout_b": [f"u{k}" for k in range(5)]})
    check_sample(answers, pairs)  # the same rollouts, in either order: accepted
    pairs.loc[2, "rollout_b"] = "w2"
    with pytest.raises(ValueError, match="ana.jsonl: pair 2 is not this sample's pair"):
        check_sample(answers, pairs)
    pairs.loc[2, "rollout_b"] = "u2"
    with pytest.raises(ValueError, match="pair 4 is not"):  # a pair the sample lacks
        check_sample(answers, pairs.drop(index=4))
