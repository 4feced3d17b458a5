"""Human annotations replayed as a judge: the human majority of
:func:`workbench.ranking.agreement.majority_votes`, the one majority vote of the
workbench (its rules are in :mod:`workbench.ranking.agreement`).

R2S-Eval (appendix D.7): three annotators judge each video pair; the majority vote is
the human reference; unanimous agreement was 78.5% (LIBERO) and 80.0% (real-to-sim).

:class:`HumanJudge` takes answers in the annotation format (``pair_id``,
``annotator``, ``shown_a``, ``shown_b``, ``choice`` "A", "B" or "invalid"; from
:func:`workbench.ranking.annotation.read_answers`) and counts the valid ones: a pair
whose valid answers tie, or that has none, comes back invalid. A CSV of the older
form, one row per (pair, annotator) with ``video_a`` and ``video_b`` (the rollout ids
shown as A and B), is read by :func:`load_annotations` into that format (the judge
reads either).

>>> import pandas as pd
>>> ann = pd.DataFrame({"pair_id": [1, 1, 1], "annotator": ["x", "y", "z"],
...                     "choice": ["A", "B", "A"], "video_a": "v1", "video_b": "v2"})
>>> HumanJudge(ann).compare(RolloutRef("v2"), RolloutRef("v1"), "task").winner
'B'
"""

from __future__ import annotations

import os

import pandas as pd

from workbench.ranking.agreement import majority_votes
from workbench.ranking.judges.base import Preference, RolloutRef

COLUMNS = ("pair_id", "annotator", "choice", "video_a", "video_b")


def load_annotations(source: str | os.PathLike | pd.DataFrame) -> pd.DataFrame:
    """Read and check annotations of the older form (a CSV path or a DataFrame) and
    return them as answers (``shown_a``/``shown_b`` for ``video_a``/``video_b``,
    choices upper-cased).

    Raises ValueError on missing columns, choices other than A/B, an annotator voting
    twice on a pair, or a pair whose videos differ between rows.
    """
    table = source.copy() if isinstance(source, pd.DataFrame) else pd.read_csv(source)
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"annotations: expected columns {list(COLUMNS)}; got "
                         f"{list(table.columns)} (no {missing})")
    table["choice"] = table["choice"].astype(str).str.strip().str.upper()
    bad = table.loc[~table["choice"].isin(["A", "B"]), "choice"]
    if len(bad):
        raise ValueError(f"annotations, row {bad.index[0]}: expected choice A or B; "
                         f"got {bad.iloc[0]!r}")
    if table.duplicated(["pair_id", "annotator"]).any():
        raise ValueError("annotations: expected one answer per annotator and pair_id; got "
                         "an annotator who judged the same pair_id twice")
    if (table.groupby("pair_id")[["video_a", "video_b"]].nunique() > 1).any(axis=None):
        raise ValueError("annotations: expected the same videos in every row of a pair_id; "
                         "got a pair_id that shows different videos in different rows")
    return table.rename(columns={"video_a": "shown_a", "video_b": "shown_b"})


class HumanJudge:
    """Replays the human majority vote (over valid answers) as a judge; unannotated and
    tied pairs come back invalid."""

    description = "human annotators (majority vote of recorded annotations), not a model"

    def __init__(self, answers: pd.DataFrame, name: str = "human-majority") -> None:
        self.name = name
        if "shown_a" not in answers.columns:  # the older form, video_a/video_b
            answers = load_annotations(answers)
        valid = answers[answers["choice"].isin(["A", "B"])]
        votes = majority_votes(valid) if len(valid) else pd.DataFrame(
            columns=["rollout_x", "rollout_y", "majority"])
        self._majority = {(str(r.rollout_x), str(r.rollout_y)): r.majority
                          for r in votes.itertuples()}

    def compare(self, a: RolloutRef, b: RolloutRef, task: str) -> Preference:
        """The majority's rollout for this pair, as "A" or "B" of the order (a, b) asked."""
        pair = tuple(sorted((str(a.rollout_id), str(b.rollout_id))))
        if pair not in self._majority:
            return Preference(winner=None, raw="not annotated")
        majority = self._majority[pair]
        winner = None if majority is None else ("A" if majority == a.rollout_id else "B")
        return Preference(winner=winner, raw=str(winner))
