"""Agreement among annotators, and of judges with the human majority (R2S-Eval's Q4).

R2S-Eval (appendix D.7) has three annotators judge 200 pairs; the majority vote is the
human reference, unanimity was 78.5% (LIBERO) and 80.0% (real-to-sim), and a judge's
human agreement rate is the share of pairs where it prefers the majority's video.

Answers come from annotation files (:func:`load_annotation_files`, the format of
:mod:`workbench.ranking.annotation`). Each answer names the rollouts shown as A and B,
so it is turned into the rollout it preferred (None for "invalid"); a pair's rollouts
are counted in one fixed order, ``rollout_x`` < ``rollout_y`` by id, whatever each
annotator saw. Rules:

* **majority**: the rollout with strictly more votes than the other rollout and than
  "invalid"; when "invalid" has strictly the most the pair's status is ``invalid``
  (all-invalid included), otherwise a tie is ``tie``; neither has a majority;
* **unanimous**: at least two answers, every one for the same rollout (an "invalid"
  answer breaks unanimity);
* **Fleiss' kappa** (Fleiss 1971) over the categories x, y, invalid, on the pairs that
  every annotator answered;
* **Cohen's kappa** of a rater against the majority (scikit-learn's
  ``cohen_kappa_score``) on labels x/y, over pairs with a majority and a valid answer.

>>> ans = pd.DataFrame({"annotator": ["a", "b", "c"], "pair_id": 0, "shown_a": ["u", "v", "u"],
...                     "shown_b": ["v", "u", "v"], "choice": ["A", "B", "B"], "timestamp": ""})
>>> majority_votes(ans)[["majority", "status", "unanimous"]].values.tolist()
[['u', 'majority', False]]
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from workbench.ranking.annotation import read_answers

if TYPE_CHECKING:  # judges.human builds on majority_votes: no import at run time
    from workbench.ranking.judges.base import Judge

Preferred = Mapping[int, "str | None"]  # pair_id -> the preferred rollout id (None: invalid)
CATEGORIES = ("x", "y", "invalid")


def load_annotation_files(paths: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """Answers from one or more files (:func:`~workbench.ranking.annotation.read_answers`),
    with a ``source`` column. Raises ValueError when no path is given, when an annotator
    answered one pair in two files, or when files disagree on a pair's rollouts."""
    if not paths:
        raise ValueError("no annotation files given")
    answers = pd.concat([read_answers(p) for p in paths], ignore_index=True)
    twice = answers[answers.duplicated(["annotator", "pair_id"], keep=False)]
    if len(twice):
        row = twice.iloc[0]
        files = sorted(set(twice.loc[(twice["annotator"] == row["annotator"])
                                     & (twice["pair_id"] == row["pair_id"]), "source"]))
        raise ValueError(f"annotator {row['annotator']!r} answered pair {row['pair_id']} "
                         f"in more than one file: {files}")
    preferred_rollouts(answers)  # checks each pair shows the same two rollouts everywhere
    return answers


def preferred_rollouts(answers: pd.DataFrame) -> pd.DataFrame:
    """``answers`` with rollout_x, rollout_y (the pair's rollouts, sorted) and preferred
    (the chosen rollout's id, None for "invalid"). Raises ValueError when one pair_id
    shows different rollouts in different answers."""
    out = answers.copy()
    out["rollout_x"] = np.minimum(out["shown_a"].astype(str), out["shown_b"].astype(str))
    out["rollout_y"] = np.maximum(out["shown_a"].astype(str), out["shown_b"].astype(str))
    mixed = out.groupby("pair_id")[["rollout_x", "rollout_y"]].nunique().gt(1).any(axis=1)
    if mixed.any():
        raise ValueError(f"pair {mixed[mixed].index[0]} shows different rollouts in different "
                         "answers: were they written for different samples?")
    out["preferred"] = pd.Series(np.where(out["choice"].eq("A"), out["shown_a"],
                                          np.where(out["choice"].eq("B"), out["shown_b"], None)),
                                 index=out.index, dtype=object)
    return out


def _status(x: int, y: int, invalid: int) -> str:
    if max(x, y) > invalid and x != y:
        return "majority"
    return "invalid" if invalid > max(x, y) else "tie"


def majority_votes(answers: pd.DataFrame) -> pd.DataFrame:
    """One row per pair: pair_id, rollout_x, rollout_y, n_answers, votes_x, votes_y,
    invalid, status ("majority", "tie" or "invalid"), majority (rollout id or None) and
    unanimous; the rules are in the module docstring."""
    table = preferred_rollouts(answers)
    table = table.assign(vx=table["preferred"].eq(table["rollout_x"]),
                         vy=table["preferred"].eq(table["rollout_y"]),
                         vi=table["preferred"].isna())
    votes = table.groupby("pair_id", sort=True).agg(
        rollout_x=("rollout_x", "first"), rollout_y=("rollout_y", "first"),
        n_answers=("choice", "size"), votes_x=("vx", "sum"), votes_y=("vy", "sum"),
        invalid=("vi", "sum")).reset_index()
    votes["status"] = [_status(*v) for v in zip(votes["votes_x"], votes["votes_y"],
                                                votes["invalid"])]
    majority = np.where(votes["votes_x"] > votes["votes_y"], votes["rollout_x"], votes["rollout_y"])
    votes["majority"] = pd.Series(majority, dtype=object).where(votes["status"] == "majority", None)
    votes["unanimous"] = (votes["n_answers"] >= 2) & (
        (votes["votes_x"] == votes["n_answers"]) | (votes["votes_y"] == votes["n_answers"]))
    return votes


def unanimity_rate(votes: pd.DataFrame) -> float:
    """Share of pairs with at least two answers on which all chose the same rollout
    (``votes`` from :func:`majority_votes`); NaN when no pair has two answers.

    >>> unanimity_rate(pd.DataFrame({"n_answers": [3, 3, 1], "unanimous": [True, False, False]}))
    0.5
    """
    judged = votes[votes["n_answers"] >= 2]
    return float(judged["unanimous"].mean()) if len(judged) else float("nan")


def fleiss_kappa(counts: ArrayLike) -> float:
    """Fleiss' kappa of ``counts``: (n_items, n_categories) int array, counts[i, j] =
    raters who put item i in category j; every item needs the same number n >= 2 of
    raters. kappa = (P - Pe) / (1 - Pe), P the mean per-item agreement
    (sum_j n_ij^2 - n) / (n (n - 1)), Pe the sum of squared category shares; NaN when
    Pe = 1 (every rating in one category).

    >>> round(fleiss_kappa([[3, 0], [0, 3], [3, 0]]), 3), round(fleiss_kappa([[2, 1], [1, 2]]), 3)
    (1.0, -0.333)
    """
    n_ij = np.asarray(counts, dtype=np.float64)
    if n_ij.ndim != 2 or len(n_ij) == 0 or (n_ij < 0).any():
        raise ValueError(f"counts: expected a non-empty (items, categories) array of "
                         f"non-negative counts; got shape {n_ij.shape}")
    raters = n_ij.sum(axis=1)
    if np.ptp(raters) != 0 or raters[0] < 2:
        raise ValueError(f"every item needs the same number (>= 2) of raters; got "
                         f"{sorted(set(raters.astype(int).tolist()))}")
    n = raters[0]
    agreement = ((n_ij**2).sum(axis=1) - n) / (n * (n - 1))
    shares = n_ij.sum(axis=0) / n_ij.sum()
    expected = float((shares**2).sum())
    if np.isclose(expected, 1.0):
        return float("nan")
    return float((agreement.mean() - expected) / (1 - expected))


def rating_counts(answers: pd.DataFrame) -> np.ndarray:
    """(n_pairs, 3) int array over the pairs every annotator answered: votes for
    rollout_x, for rollout_y, and "invalid" answers (the input of :func:`fleiss_kappa`)."""
    votes = majority_votes(answers)
    everyone = votes[votes["n_answers"] == answers["annotator"].nunique()]
    return everyone[["votes_x", "votes_y", "invalid"]].to_numpy(np.int64)


def judge_preferences(pairs: pd.DataFrame, rollouts: pd.DataFrame, judge: Judge) -> dict[int, str | None]:
    """Ask ``judge`` about each pair (shown as the sample's rollout_a, rollout_b) and
    return pair_id -> the preferred rollout id (None for an invalid answer)."""
    from workbench.ranking.sampling import RolloutIndex

    index, out = RolloutIndex(rollouts), {}
    for pair in pairs.itertuples():
        winner = judge.compare(index.ref(pair.rollout_a), index.ref(pair.rollout_b), pair.task).winner
        out[int(pair.pair_id)] = {"A": pair.rollout_a, "B": pair.rollout_b}.get(winner)
    return out


def agreement_with_majority(votes: pd.DataFrame, preferred: Preferred) -> dict[str, float]:
    """A rater against the majority over pairs with a majority and a valid answer from
    the rater: n_pairs, agreement (share of equal choices) and cohen_kappa (labels x/y;
    NaN when undefined, e.g. both sides always chose x).

    >>> votes = pd.DataFrame({"pair_id": [0, 1], "rollout_x": ["a", "c"], "rollout_y": ["b", "d"],
    ...                       "majority": ["a", "d"]})
    >>> agreement_with_majority(votes, {0: "a", 1: "d"})
    {'n_pairs': 2, 'agreement': 1.0, 'cohen_kappa': 1.0}
    """
    from sklearn.metrics import cohen_kappa_score

    mine = votes["pair_id"].map(lambda k: preferred.get(int(k)))
    keep = votes["majority"].notna() & mine.notna()
    if not keep.any():
        return {"n_pairs": 0, "agreement": float("nan"), "cohen_kappa": float("nan")}
    x = votes.loc[keep, "rollout_x"]
    human = np.where(votes.loc[keep, "majority"] == x, "x", "y")
    rater = np.where(mine[keep] == x, "x", "y")
    with warnings.catch_warnings():  # undefined (0/0) kappa: NaN, warned about by sklearn
        warnings.simplefilter("ignore")
        kappa = float(cohen_kappa_score(human, rater, labels=["x", "y"]))
    return {"n_pairs": int(keep.sum()), "agreement": float(np.mean(human == rater)),
            "cohen_kappa": kappa}


def judge_agreement_table(answers: pd.DataFrame, judges: Mapping[str, Preferred] | None = None
                    ) -> pd.DataFrame:
    """Each annotator (their own vote is part of the majority) and each judge
    (name -> pair_id -> preferred rollout, as from :func:`judge_preferences`) against
    the majority. Index ``rater``; columns kind ("annotator"/"judge"), n_pairs,
    agreement, cohen_kappa."""
    votes = majority_votes(answers)
    table = preferred_rollouts(answers)
    raters = {name: ("annotator", dict(zip(part["pair_id"].astype(int), part["preferred"])))
              for name, part in table.groupby("annotator", sort=True)}
    raters |= {name: ("judge", dict(p)) for name, p in (judges or {}).items()}
    rows = {name: {"kind": kind} | agreement_with_majority(votes, prefs)
            for name, (kind, prefs) in raters.items()}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("rater")


def annotation_summary(answers: pd.DataFrame) -> dict[str, float | int]:
    """Counts and rates over all answers: annotators, pairs, answers, invalid_answers,
    pairs with a majority / a tie / an invalid plurality, unanimous_pairs, unanimity
    (:func:`unanimity_rate`), fleiss_kappa and fleiss_pairs (the pairs it is over)."""
    votes = majority_votes(answers)
    counts = rating_counts(answers)
    status = votes["status"].value_counts()
    fleiss = fleiss_kappa(counts) if len(counts) and answers["annotator"].nunique() >= 2 \
        else float("nan")
    return {"annotators": int(answers["annotator"].nunique()), "pairs": len(votes),
            "answers": len(answers), "invalid_answers": int(answers["choice"].eq("invalid").sum()),
            "majority": int(status.get("majority", 0)), "tie": int(status.get("tie", 0)),
            "invalid": int(status.get("invalid", 0)),
            "unanimous_pairs": int(votes["unanimous"].sum()), "unanimity": unanimity_rate(votes),
            "fleiss_kappa": fleiss, "fleiss_pairs": len(counts)}


def check_sample(answers: pd.DataFrame, pairs: pd.DataFrame) -> None:
    """Raise ValueError unless every answer is about a pair of ``pairs`` (as
    :attr:`~workbench.ranking.annotation.AnnotationSample.pairs`) and shows its two
    rollouts: answers of another sample would be compared with the wrong judgments.

    >>> pairs = pd.DataFrame({"pair_id": [0], "rollout_a": ["u"], "rollout_b": ["v"]})
    >>> check_sample(pd.DataFrame({"pair_id": [0], "shown_a": ["v"], "shown_b": ["u"],
    ...                            "source": ["ana.jsonl"]}), pairs)
    """
    rollouts = {int(p.pair_id): {p.rollout_a, p.rollout_b} for p in pairs.itertuples()}
    for row in answers.itertuples():
        if rollouts.get(int(row.pair_id)) != {row.shown_a, row.shown_b}:
            raise ValueError(f"{getattr(row, 'source', 'answers')}: pair {row.pair_id} is not "
                             "this sample's pair (other rollouts or pair id); were the answers "
                             "given on another sample (other rollouts, n_pairs or seed)?")
