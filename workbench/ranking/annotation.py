"""Pairs for human annotation: R2S-Eval's 200 task-stratified pairs.

The paper's human study asks annotators about 200 rollout pairs of one task and initial
state: 66 where both rollouts succeeded, 67 where both failed and 67 where one did.
:func:`sample_annotation_pairs` draws such a set from a rollout table (columns
``policy``, ``task``, ``init_id``, ``rollout_id``, ``success``; ``video`` or
``video_path`` for the annotator): within each outcome class, tasks are dealt round
robin (shuffled), so every task gives as many pairs as the data allows, and each pair's
A/B order is a coin flip. A class with too few candidate pairs gives all it has; the
shortfall is reported, never filled from another class.

>>> from workbench.ranking.sampling import demo_rollout_table
>>> table = demo_rollout_table(["p", "q", "r"], tasks=["t1", "t2"], inits=4, repeats=1)
>>> table["success"] = table["policy"] != "r"  # only r fails: no pair fails twice
>>> sample = sample_annotation_pairs(table, n_pairs=12, seed=0)
>>> sample.wanted, sample.shortfall
({'success-success': 4, 'failure-failure': 4, 'success-failure': 4}, {'success-success': 0, 'failure-failure': 4, 'success-failure': 0})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

PAPER_SPLIT = (("success-success", 66), ("failure-failure", 67), ("success-failure", 67))
"""The paper's outcome classes and their counts among 200 pairs."""


@dataclass(frozen=True)
class AnnotationSample:
    """The sampled pairs and how they meet the split.

    pairs: one row per pair: pair_id, task, init_id, outcome, policy_a, policy_b,
    rollout_a, rollout_b, video_a, video_b (policies are for the analysis, never shown);
    wanted: pairs asked per class; shortfall: pairs missing per class (0: met).
    """

    pairs: pd.DataFrame
    wanted: dict[str, int]
    shortfall: dict[str, int]


def split_counts(n_pairs: int, split: Sequence[tuple[str, int]] = PAPER_SPLIT
                 ) -> dict[str, int]:
    """The split scaled to ``n_pairs`` (largest remainders; 66/67/67 at 200).

    >>> split_counts(200), split_counts(12)
    ({'success-success': 66, 'failure-failure': 67, 'success-failure': 67}, {'success-success': 4, 'failure-failure': 4, 'success-failure': 4})
    """
    total = sum(n for _, n in split)
    exact = [n * n_pairs / total for _, n in split]
    counts = [int(x) for x in exact]
    for k in sorted(range(len(split)), key=lambda k: (counts[k] - exact[k], -k))[
            :n_pairs - sum(counts)]:
        counts[k] += 1
    return {name: c for (name, _), c in zip(split, counts)}


def outcome_class(success_a: bool, success_b: bool) -> str:
    """``success-success``, ``failure-failure`` or ``success-failure`` (either order)."""
    if success_a and success_b:
        return "success-success"
    return "success-failure" if success_a or success_b else "failure-failure"


def sample_annotation_pairs(rollouts: pd.DataFrame, n_pairs: int = 200,
                            split: Sequence[tuple[str, int]] = PAPER_SPLIT,
                            seed: int = 0) -> AnnotationSample:
    """Draw ``n_pairs`` distinct rollout pairs (two policies, one task and initial
    state), task-stratified within each outcome class of ``split`` (scaled to
    ``n_pairs``), A/B order randomised; see the module docstring."""
    from workbench.ranking.pipeline import candidate_pairs

    if "success" not in rollouts.columns:
        raise ValueError("the rollout table needs a success column to split pairs by outcome")
    rng = np.random.default_rng(seed)
    candidates = candidate_pairs(rollouts)
    success = rollouts.set_index("rollout_id")["success"].astype(bool)
    candidates["outcome"] = [outcome_class(success[i], success[j]) for i, j in
                             zip(candidates["rollout_i"], candidates["rollout_j"])]
    wanted = split_counts(n_pairs, split)
    chosen: list[int] = []
    shortfall = {}
    for name, want in wanted.items():
        picked = _round_robin(candidates[candidates["outcome"] == name], want, rng)
        chosen += picked
        shortfall[name] = want - len(picked)
    pairs = candidates.loc[chosen].reset_index(drop=True)
    a_is_i = rng.random(len(pairs)) < 0.5
    video = _videos(rollouts)
    out = pd.DataFrame({
        "pair_id": range(len(pairs)), "task": pairs["task"], "init_id": pairs["init_id"],
        "outcome": pairs["outcome"],
        "policy_a": np.where(a_is_i, pairs["policy_i"], pairs["policy_j"]),
        "policy_b": np.where(a_is_i, pairs["policy_j"], pairs["policy_i"]),
        "rollout_a": np.where(a_is_i, pairs["rollout_i"], pairs["rollout_j"]),
        "rollout_b": np.where(a_is_i, pairs["rollout_j"], pairs["rollout_i"])})
    out["video_a"] = out["rollout_a"].map(video)
    out["video_b"] = out["rollout_b"].map(video)
    return AnnotationSample(out, wanted, shortfall)


def _round_robin(pool: pd.DataFrame, want: int, rng: np.random.Generator) -> list[int]:
    """Up to ``want`` rows of ``pool``, one task at a time in a shuffled order, each
    task's rows in a shuffled order."""
    queues = [list(rng.permutation(np.asarray(rows)))
              for _, rows in sorted(pool.groupby("task").groups.items())]
    queues = [queues[k] for k in rng.permutation(len(queues))]
    picked: list[int] = []
    while len(picked) < want and any(queues):
        for queue in queues:
            if queue and len(picked) < want:
                picked.append(int(queue.pop()))
    return picked


def _videos(rollouts: pd.DataFrame) -> pd.Series:
    column = "video" if "video" in rollouts.columns else (
        "video_path" if "video_path" in rollouts.columns else None)
    if column is None:
        return pd.Series(dtype=object)
    return rollouts.set_index("rollout_id")[column]
