"""The paper's metrics as means over comparison budgets (R2S-Eval reports each metric
averaged over 500..2000 comparisons per pair, in steps of 100)."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from workbench.ranking.bradley_terry import fit_bradley_terry
from workbench.ranking.metrics import mmrv
from workbench.ranking.sampling import (budgets_within, demo_rollout_table,
                                        metrics_over_budgets, sample_comparisons,
                                        wins_from_preferences)

POLICIES = ["p", "q", "r"]
TRUTH = {"p": 0.9, "q": 0.6, "r": 0.3}


def preferences(per_pair=1000, flip_until=500):
    """p beats everyone; q beats r except in r's first ``flip_until`` comparisons with q,
    and loses to r often enough there that small budgets rank r above q."""
    table = demo_rollout_table(POLICIES, tasks=["t1", "t2"], inits=2, repeats=1)
    prefs = sample_comparisons(table, per_pair, seed=0)
    rng = np.random.default_rng(0)
    better = np.array([min(a, b) for a, b in zip(prefs["policy_a"], prefs["policy_b"])])
    qr = prefs["policy_a"].isin(["q", "r"]) & prefs["policy_b"].isin(["q", "r"])
    early = qr & (prefs["slot"] < flip_until)
    draw = rng.random(len(prefs))
    upset = (early & (draw < 0.7)) | (~early & qr & (draw < 0.05))
    winner_policy = np.where(upset, np.where(better == "q", "r", "q"), better)
    return prefs.assign(winner=np.where(winner_policy == prefs["policy_a"], "A", "B"))


def test_paper_budgets_fit_the_run():
    assert budgets_within(2000) == list(range(500, 2001, 100))
    assert budgets_within(1000) == [500, 600, 700, 800, 900, 1000]
    assert budgets_within(499) == []
    assert budgets_within(300, start=100, stop=300, step=100) == [100, 200, 300]


def test_each_budget_refits_its_prefix_and_the_mean_is_their_average():
    prefs = preferences()
    budgets = budgets_within(1000)
    per_budget, mean = metrics_over_budgets(prefs, POLICIES, TRUTH, budgets)
    assert per_budget["budget"].tolist() == budgets
    truth = np.array([TRUTH[p] for p in POLICIES])
    for budget, row in per_budget.set_index("budget").iterrows():
        wins = wins_from_preferences(prefs[prefs["slot"] < budget], POLICIES)
        scores = fit_bradley_terry(wins).scores
        assert row["spearman"] == pytest.approx(stats.spearmanr(truth, scores).statistic)
        assert row["pearson"] == pytest.approx(stats.pearsonr(truth, scores).statistic)
        assert row["mmrv"] == pytest.approx(mmrv(truth, scores))
    # small budgets rank r above q (the early upsets), large ones recover the order: the
    # average differs from the final fit's value, which is the point of reporting both
    assert per_budget["spearman"].iloc[0] == pytest.approx(0.5)
    assert per_budget["spearman"].iloc[-1] == pytest.approx(1.0)
    assert mean["spearman"] == pytest.approx(per_budget["spearman"].mean())
    assert 0.5 < mean["spearman"] < 1.0
    assert mean["mmrv"] == pytest.approx(per_budget["mmrv"].mean()) and mean["mmrv"] > 0


def test_interval_widths_per_budget_with_the_bootstrap():
    per_budget, mean = metrics_over_budgets(preferences(), POLICIES, TRUTH, [500, 1000],
                                            n_boot=200, seed=1)
    widths = per_budget["mean_ci_width"].to_numpy()
    assert widths[1] < widths[0]  # twice the comparisons, narrower intervals
    assert mean["mean_ci_width"] == pytest.approx(widths.mean())
    assert isinstance(per_budget, pd.DataFrame)
