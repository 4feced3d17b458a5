"""Pair sampling: shared task and init, even tasks and balanced A/B in every prefix, nesting."""

import numpy as np
import pandas as pd
import pytest

from workbench.ranking.bradley_terry import fit_bradley_terry
from workbench.ranking.sampling import (checkpoints, convergence_curve, demo_rollout_table,
                                        sample_comparisons, wins_from_preferences)

POLICIES = ["p0", "p1", "p2", "p3"]
TASKS = [f"task{k}" for k in range(7)]


@pytest.fixture(scope="module")
def table():
    full = demo_rollout_table(POLICIES, TASKS, inits=4, repeats=3)
    # p3 lacks init 0 everywhere: its comparisons must avoid init 0
    return full[~((full["policy"] == "p3") & (full["init_id"] == 0))].reset_index(drop=True)


@pytest.fixture(scope="module")
def comps(table):
    return sample_comparisons(table, 200, seed=0)


def test_one_row_per_slot_and_pair(comps):
    assert len(comps) == 6 * 200
    assert (comps.groupby("pair")["slot"].apply(lambda s: sorted(s) == list(range(200)))).all()


def test_both_rollouts_share_task_and_init(comps, table):
    meta = table.set_index("rollout_id")
    for side in ("i", "j"):
        rows = meta.loc[comps[f"rollout_{side}"]]
        assert (rows["task"].to_numpy() == comps["task"].to_numpy()).all()
        assert (rows["init_id"].to_numpy() == comps["init_id"].to_numpy()).all()
        assert (rows["policy"].to_numpy() == comps[f"policy_{side}"].to_numpy()).all()
    assert not ((comps["policy_j"] == "p3") & (comps["init_id"] == 0)).any()


def test_tasks_even_in_every_prefix(comps):
    for _, part in comps.groupby("pair"):
        tasks = part.sort_values("slot")["task"].to_numpy()
        for k in range(1, len(tasks) + 1):
            counts = pd.Series(tasks[:k]).value_counts().reindex(TASKS, fill_value=0)
            assert counts.max() - counts.min() <= 1


def test_ab_positions_balanced_in_every_prefix(comps):
    for _, part in comps.groupby("pair"):
        flags = part.sort_values("slot")["a_is_i"].to_numpy()
        prefix = np.cumsum(flags)
        assert np.all(np.abs(2 * prefix - np.arange(1, len(flags) + 1)) <= 1)
    presented_i = np.where(comps["a_is_i"], comps["policy_a"], comps["policy_b"])
    assert (presented_i == comps["policy_i"]).all()


def test_draws_with_replacement_and_seeded(table, comps):
    again = sample_comparisons(table, 200, seed=0)
    pd.testing.assert_frame_equal(comps, again)
    other = sample_comparisons(table, 200, seed=1)
    assert not comps["rollout_i"].equals(other["rollout_i"])
    # 200 draws from 21 init/task cells with 3 rollouts each: repeats must occur
    assert comps.duplicated(["pair", "rollout_i", "rollout_j"]).any()


def test_checkpoints_are_nested_prefixes(table):
    full = sample_comparisons(table, 300, seed=4)
    small = sample_comparisons(table, 120, seed=4)
    head = full[full["slot"] < 120].reset_index(drop=True)
    pd.testing.assert_frame_equal(head, small)
    assert checkpoints() == list(range(500, 2001, 100))


def test_unknown_pairs_and_bad_tables_rejected(table):
    with pytest.raises(ValueError, match="share no"):
        lone = pd.concat([table, pd.DataFrame({"policy": ["solo"], "task": ["other"],
                                               "init_id": [0], "rollout_id": ["x"]})])
        sample_comparisons(lone, 10)
    with pytest.raises(ValueError, match="lacks columns"):
        sample_comparisons(table.drop(columns="init_id"), 10)
    with pytest.raises(ValueError, match="unique"):
        sample_comparisons(pd.concat([table, table]), 10)
    with pytest.raises(ValueError, match="positive"):
        sample_comparisons(table, 0)


def test_wins_from_preferences(comps):
    prefs = comps.assign(winner=np.where(comps["policy_a"] < comps["policy_b"], "A", "B"))
    prefs.loc[prefs.index[:6], "winner"] = None  # invalid rows are skipped
    wins = wins_from_preferences(prefs, POLICIES)
    assert wins.sum() == len(prefs) - 6
    assert np.all(np.tril(wins) == 0)  # lower-named policy always won
    with pytest.raises(ValueError, match="not in the list"):
        wins_from_preferences(prefs, POLICIES[:2])
    with pytest.raises(ValueError, match="winner must be"):
        wins_from_preferences(prefs.assign(winner="C"), POLICIES)


def test_convergence_curve_uses_prefixes(comps):
    rng = np.random.default_rng(0)
    prefs = comps.assign(winner=np.where(rng.random(len(comps)) < 0.5, "A", "B"))
    curve = convergence_curve(prefs, POLICIES, [50, 200])
    assert curve.shape == (8, 3)
    last = fit_bradley_terry(wins_from_preferences(prefs, POLICIES)).scores
    np.testing.assert_allclose(curve[curve["checkpoint"] == 200]["score"], last)
    with_ci = convergence_curve(prefs, POLICIES, [100], n_boot=50)
    assert {"lower", "upper", "mean_ci_width"} <= set(with_ci.columns)
