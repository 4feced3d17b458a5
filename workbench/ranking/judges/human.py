"""Human annotations: read them, take the majority vote per pair, measure unanimity.

R2S-Eval (appendix D.7): three annotators judge each video pair; the majority vote is
the human reference; unanimous agreement was 78.5% (LIBERO) and 80.0% (real-to-sim).

An annotation file is a CSV with one row per (pair, annotator): ``pair_id``,
``annotator``, ``choice`` ("A" or "B"), ``video_a``, ``video_b`` (the video ids shown as
A and B; they match :attr:`RolloutRef.rollout_id`).

>>> import pandas as pd
>>> ann = pd.DataFrame({"pair_id": [1, 1, 1], "annotator": ["x", "y", "z"],
...                     "choice": ["A", "B", "A"], "video_a": "v1", "video_b": "v2"})
>>> majority_vote(ann)[["pair_id", "choice", "unanimous"]].values.tolist()
[[1, 'A', False]]
>>> HumanJudge(ann).compare(RolloutRef("v2"), RolloutRef("v1"), "task").winner
'B'
"""

from __future__ import annotations

import os

import pandas as pd

from workbench.ranking.judges.base import Preference, RolloutRef

COLUMNS = ("pair_id", "annotator", "choice", "video_a", "video_b")


def load_annotations(source: str | os.PathLike | pd.DataFrame) -> pd.DataFrame:
    """Read and check annotations (a CSV path or a DataFrame); choices upper-cased.

    Raises ValueError on missing columns, choices other than A/B, an annotator voting
    twice on a pair, or a pair whose videos differ between rows.
    """
    table = source.copy() if isinstance(source, pd.DataFrame) else pd.read_csv(source)
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"annotations lack columns {missing}; need {list(COLUMNS)}")
    table["choice"] = table["choice"].astype(str).str.strip().str.upper()
    bad = table.loc[~table["choice"].isin(["A", "B"]), "choice"]
    if len(bad):
        raise ValueError(f"choice must be A or B; found {bad.iloc[0]!r} (row {bad.index[0]})")
    if table.duplicated(["pair_id", "annotator"]).any():
        raise ValueError("an annotator judged the same pair_id twice")
    if (table.groupby("pair_id")[["video_a", "video_b"]].nunique() > 1).any(axis=None):
        raise ValueError("a pair_id shows different videos in different rows")
    return table


def majority_vote(annotations: pd.DataFrame) -> pd.DataFrame:
    """One row per pair: video_a, video_b, votes_a, votes_b, choice (None on a tie), unanimous."""
    table = load_annotations(annotations)
    votes = table.assign(a=table["choice"].eq("A"), b=table["choice"].eq("B"))
    out = votes.groupby("pair_id", sort=True).agg(video_a=("video_a", "first"),
                                                  video_b=("video_b", "first"),
                                                  votes_a=("a", "sum"), votes_b=("b", "sum"))
    out["choice"] = pd.Series([("A" if a > b else "B") if a != b else None
                               for a, b in zip(out["votes_a"], out["votes_b"])],
                              index=out.index, dtype=object)
    out["unanimous"] = (out["votes_a"] == 0) | (out["votes_b"] == 0)
    return out.reset_index()


def unanimity_rate(annotations: pd.DataFrame) -> float:
    """Share of pairs on which every annotator chose the same video.

    >>> ann = pd.DataFrame({"pair_id": [1, 1, 2, 2], "annotator": ["x", "y"] * 2,
    ...                     "choice": ["A", "A", "A", "B"], "video_a": "p", "video_b": "q"})
    >>> unanimity_rate(ann)
    0.5
    """
    return float(majority_vote(annotations)["unanimous"].mean())


class HumanJudge:
    """Replays the human majority vote as a judge; unannotated pairs come back invalid."""

    description = "human annotators (majority vote of recorded annotations), not a model"

    def __init__(self, annotations: pd.DataFrame, name: str = "human-majority") -> None:
        self.name = name
        votes = majority_vote(annotations)
        self._choice = {(str(r.video_a), str(r.video_b)): r.choice for r in votes.itertuples()}

    def compare(self, a: RolloutRef, b: RolloutRef, task: str) -> Preference:
        """The majority choice for this pair, mapped to the order (a, b) asked."""
        ids = (a.rollout_id, b.rollout_id)
        if ids in self._choice:
            choice = self._choice[ids]
        elif ids[::-1] in self._choice:
            choice = {"A": "B", "B": "A", None: None}[self._choice[ids[::-1]]]
        else:
            return Preference(winner=None, raw="not annotated")
        return Preference(winner=choice, raw=str(choice))
