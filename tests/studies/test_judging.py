"""Judging sampled comparisons end to end, with redraws for invalid answers."""

import numpy as np
import pandas as pd
import pytest

from workbench.ranking.bradley_terry import ConvergenceWarning
from workbench.studies.judging import judge_comparisons
from workbench.ranking.judges.base import Preference
from workbench.ranking.judges.offline import OfflineJudge
from workbench.ranking.synthetic import synthetic_rollout
from workbench.records.rollout import save_rollout
from workbench.ranking.sampling import convergence_curve, sample_comparisons, wins_from_preferences

KIND_OF_POLICY = {"steady": "smooth", "shaky": "jerky", "fidgety": "chattering"}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    folder = tmp_path_factory.mktemp("episodes")
    rows = []
    for policy, kind in KIND_OF_POLICY.items():
        for task in ("lift", "push"):
            for init in range(2):
                for rep in range(2):
                    rid = f"{policy}-{task}-{init}-{rep}"
                    seed = 100 * init + 10 * rep + len(task)
                    save_rollout(synthetic_rollout(kind, success=True, seed=seed),
                                 folder / f"{rid}.npz")
                    rows.append((policy, task, init, rid, str(folder / f"{rid}.npz")))
    return pd.DataFrame(rows, columns=["policy", "task", "init_id", "rollout_id", "path"])


def test_offline_judge_ranks_the_policies(table):
    comps = sample_comparisons(table, 40, seed=0)
    prefs = judge_comparisons(comps, table, OfflineJudge())
    assert prefs["winner"].isin(["A", "B"]).all() and (prefs["redraws"] == 0).all()
    wins = wins_from_preferences(prefs, list(KIND_OF_POLICY))
    assert wins[0, 1] == 40 and wins[0, 2] == 40 and wins[2, 1] == 40
    with pytest.warns(ConvergenceWarning):  # steady never loses: its MLE runs off to 1
        curve = convergence_curve(prefs, list(KIND_OF_POLICY), [20, 40])
    assert curve.groupby("checkpoint")["score"].apply(lambda s: s.iloc[0] > 99).all()
    assert set(prefs["judge"]) == {"offline-heuristic"}


class RefusesOneRollout:
    """A judge that cannot answer whenever one given rollout is on screen."""

    name, description = "picky", "test judge"

    def __init__(self, refused):
        self.refused, self.calls = refused, 0

    def compare(self, a, b, task):
        self.calls += 1
        if self.refused in (a.rollout_id, b.rollout_id):
            return Preference(winner=None, raw="cannot tell")
        return Preference(winner="A", raw="A")


def test_invalid_answers_are_redrawn_within_task(table):
    comps = sample_comparisons(table, 30, seed=1)
    refused = comps["rollout_i"].iloc[0]
    prefs = judge_comparisons(comps, table, RefusesOneRollout(refused), seed=0)
    redrawn = prefs[prefs["redraws"] > 0]
    assert len(redrawn) > 0 and prefs["winner"].notna().all()
    assert not ((prefs["rollout_i"] == refused) | (prefs["rollout_j"] == refused)).any()
    meta = table.set_index("rollout_id")
    assert (meta.loc[redrawn["rollout_i"], "task"].to_numpy() == redrawn["task"].to_numpy()).all()
    assert (meta.loc[redrawn["rollout_i"], "init_id"].to_numpy()
            == redrawn["init_id"].to_numpy()).all()
    # presentation follows the kept A/B assignment
    assert (np.where(prefs["a_is_i"], prefs["rollout_i"], prefs["rollout_j"])
            == prefs["rollout_a"]).all()


def test_hopeless_comparisons_stay_invalid_and_are_skipped(table):
    comps = sample_comparisons(table, 10, seed=2)

    class Never(RefusesOneRollout):
        def compare(self, a, b, task):
            self.calls += 1
            return Preference(winner=None, raw="?")

    judge = Never(None)
    prefs = judge_comparisons(comps, table, judge, max_redraws=2)
    assert prefs["winner"].isna().all() and judge.calls == 3 * len(comps)
    assert wins_from_preferences(prefs, list(KIND_OF_POLICY)).sum() == 0
