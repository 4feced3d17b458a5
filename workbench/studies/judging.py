"""Put sampled comparisons to a judge; replace the ones it cannot answer.

R2S-Eval Table VII: an invalid output is re-queried once (inside the judge), then the
comparison is excluded and resampled. Here a resample keeps the pair, task, slot and
A/B assignment and draws a fresh init_id and rollouts, at most ``max_redraws`` times.

>>> from workbench.ranking.judges.human import HumanJudge
>>> from workbench.ranking.sampling import demo_rollout_table, sample_comparisons
>>> table = demo_rollout_table(["p", "q"], tasks=["t"], inits=1, repeats=1)
>>> comps = sample_comparisons(table, 2, seed=0)
>>> ann = pd.DataFrame({"pair_id": [0], "annotator": ["x"], "choice": ["A"],
...                     "video_a": ["p/t/0/0"], "video_b": ["q/t/0/0"]})
>>> judge_comparisons(comps, table, HumanJudge(ann))["winner_policy"].tolist()
['p', 'p']
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from workbench.ranking.judges.base import Judge
from workbench.ranking.sampling import RolloutIndex, present
from workbench.records.store import RecordStore


def _shown(row: pd.Series, ri: str, rj: str, index: RolloutIndex) -> tuple:
    a, b = (ri, rj) if row["a_is_i"] else (rj, ri)
    return index.ref(a), index.ref(b), row["task"]


def _judge_one(row: pd.Series, index: RolloutIndex, judge: Judge,
               rng: np.random.Generator, max_redraws: int, first: Any = None) -> dict:
    """Judge one comparison (``first``: its answer, already asked), redrawing rollouts
    after an invalid answer."""
    ri, rj, init = row["rollout_i"], row["rollout_j"], row["init_id"]
    shared = None
    for redraws in range(max_redraws + 1):
        if redraws:
            shared = shared or index.shared(row["policy_i"], row["policy_j"])
            init, ri, rj = index.draw(row["policy_i"], row["policy_j"], row["task"],
                                      shared[row["task"]], rng)
        pref = first if redraws == 0 and first is not None else \
            judge.compare(*_shown(row, ri, rj, index))
        if pref.valid:
            break
    return {"init_id": init, "rollout_i": ri, "rollout_j": rj, "winner": pref.winner,
            "redraws": redraws, "raw": pref.raw}


def record_judging(judge: Judge, records: str | os.PathLike, label: str) -> None:
    """Write ``judge.stats`` (requests, tokens, transport retries, frames per request,
    ...) to the records SQLite at ``records`` under ``label`` (read back with
    :meth:`RecordStore.judge_stats`)."""
    stats = getattr(judge, "stats", None)
    if stats is None:
        raise ValueError(f"judge {getattr(judge, 'name', judge)!r} keeps no stats to record")
    store = RecordStore(records)
    try:
        store.record_judge_stats(label, judge.name, stats.as_dict() | {
            "frames_per_request": list(stats.frames_per_request)})
    finally:
        store.close()


def judge_comparisons(comparisons: pd.DataFrame, rollouts: pd.DataFrame, judge: Judge,
                      seed: int = 0, max_redraws: int = 3,
                      records: str | os.PathLike | None = None,
                      label: str = "ranking") -> pd.DataFrame:
    """Judge every row of ``comparisons`` (from :func:`sample_comparisons`).

    Adds winner ('A'/'B', None when still invalid after the redraws), winner_policy,
    redraws, raw (the judge's answer) and judge (its name); redrawn rows get their
    new init_id and rollouts. With ``records`` (a records SQLite path, e.g. the
    rollouts' run), the judge's accounting is written there under ``label``
    (:func:`record_judging`).
    """
    index, rng = RolloutIndex(rollouts), np.random.default_rng(seed)
    rows = [row for _, row in comparisons.iterrows()]
    # a judge that asks a server many at once (VLMJudge.compare_many) gets every first
    # attempt in one call; redraws after invalid answers then go in order, as before
    firsts = (judge.compare_many([_shown(r, r["rollout_i"], r["rollout_j"], index)
                                  for r in rows])
              if hasattr(judge, "compare_many") else [None] * len(rows))
    results = pd.DataFrame([_judge_one(row, index, judge, rng, max_redraws, first)
                            for row, first in zip(rows, firsts)], index=comparisons.index)
    out = present(comparisons.assign(**{c: results[c] for c in ("init_id", "rollout_i",
                                                                "rollout_j")}))
    winner_policy = np.where(results["winner"].eq("A"), out["policy_a"],
                             np.where(results["winner"].eq("B"), out["policy_b"], None))
    if records is not None:
        record_judging(judge, records, label)
    return out.assign(winner=results["winner"], winner_policy=winner_policy,
                      redraws=results["redraws"], raw=results["raw"], judge=judge.name)
