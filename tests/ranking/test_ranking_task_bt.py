"""Task-aware Bradley-Terry against simulated ground truth where the task effect is known:
it recovers each task's own order better than plain Bradley-Terry can (one order for all
tasks), and costs nothing when there is no task effect."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from workbench.ranking.bradley_terry import fit_bradley_terry
from workbench.ranking.task_bt import fit_task_bradley_terry

POLICIES = [f"p{k}" for k in range(5)]
TASKS = [f"t{k}" for k in range(6)]


def simulate(rng, task_spread, per_task=150):
    """Comparisons of random policy pairs on every task, won by Bradley-Terry with the true
    per-task strengths; returns the table and the true (tasks, policies) strengths."""
    skill = np.linspace(1.0, -1.0, len(POLICIES))
    truth = skill + rng.normal(0, task_spread, (len(TASKS), len(POLICIES)))
    rows = []
    for t, task in enumerate(TASKS):
        for _ in range(per_task):
            i, j = rng.choice(len(POLICIES), 2, replace=False)
            p = 1 / (1 + np.exp(-(truth[t, i] - truth[t, j])))
            rows.append((task, POLICIES[i], POLICIES[j], "a" if rng.random() < p else "b"))
    return pd.DataFrame(rows, columns=["task", "a", "b", "winner"]), skill, truth


def plain_scores(prefs):
    wins = np.zeros((len(POLICIES), len(POLICIES)))
    for row in prefs.itertuples():
        w, l = (row.a, row.b) if row.winner == "a" else (row.b, row.a)
        wins[POLICIES.index(w), POLICIES.index(l)] += 1
    return fit_bradley_terry(wins).theta


def per_task_rho(prefs, truth):
    fit = fit_task_bradley_terry(prefs)
    plain = plain_scores(prefs)
    task_aware, flat = [], []
    for t, task in enumerate(TASKS):
        scores = fit.task_scores(task).reindex(POLICIES).to_numpy()
        task_aware.append(spearmanr(scores, truth[t]).statistic)
        flat.append(spearmanr(plain, truth[t]).statistic)
    return np.mean(task_aware), np.mean(flat), fit


def test_with_a_task_effect_it_recovers_each_tasks_order_better_than_plain_bt():
    gains = []
    for seed in range(8):
        prefs, _, truth = simulate(np.random.default_rng(seed), task_spread=1.0)
        aware, flat, fit = per_task_rho(prefs, truth)
        assert fit.converged
        gains.append(aware - flat)
    assert np.mean(gains) > 0.1 and np.mean(np.array(gains) > 0) >= 0.75, gains


def test_without_a_task_effect_it_costs_little():
    losses = []
    for seed in range(8):
        prefs, skill, truth = simulate(np.random.default_rng(100 + seed), task_spread=0.0)
        aware, flat, fit = per_task_rho(prefs, truth)
        assert fit.order() == [POLICIES[k] for k in np.argsort(-plain_scores(prefs),
                                                                kind="stable")]
        losses.append(flat - aware)
    assert np.mean(losses) < 0.1, losses  # per-task orders nearly as good as the pooled one


@pytest.mark.parametrize("table, message", [
    (pd.DataFrame({"task": ["t"], "a": ["p"], "b": ["q"]}), "expected columns"),
    (pd.DataFrame({"task": ["t"], "a": ["p"], "b": ["q"], "winner": ["tie"]}),
     "at least one decided comparison"),
    (pd.DataFrame({"task": ["t"], "a": ["p"], "b": ["p"], "winner": ["a"]}), "against itself"),
])
def test_bad_tables_are_refused(table, message):
    with pytest.raises(ValueError, match=message):
        fit_task_bradley_terry(table)
