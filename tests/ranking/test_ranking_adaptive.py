"""Adaptive allocation against uniform sampling on a synthetic BT ground truth."""

import numpy as np
import pytest

from workbench.ranking.adaptive import (adaptive_comparisons, bt_oracle, plan_batch,
                                        score_covariance, uniform_comparisons)
from workbench.ranking.bootstrap import bootstrap_bradley_terry

# Well-spread strengths (neighbours 2.5x apart), the regime where allocation pays off:
# many pairs are lopsided and carry little information. See the adaptive module doc.
TRUTH = 2.5 ** -np.arange(6.0) / (2.5 ** -np.arange(6.0)).sum()
PER_PAIR = 300  # uniform baseline: 15 pairs x 300 = 4500 judge calls
WIDTH_RATIO_MAX = 1.10  # "similar interval width": adaptive within 10% of uniform
N_BOOT = 500


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_half_the_calls_same_ranking_similar_width(seed):
    uniform = uniform_comparisons(bt_oracle(TRUTH, seed), 6, PER_PAIR)
    adaptive = adaptive_comparisons(bt_oracle(TRUTH, 100 + seed), 6, uniform.judge_calls // 2)
    assert adaptive.judge_calls <= uniform.judge_calls / 2
    u = bootstrap_bradley_terry(uniform.wins, N_BOOT, seed=seed)
    a = bootstrap_bradley_terry(adaptive.wins, N_BOOT, seed=seed)
    truth_order = list(np.argsort(-TRUTH))
    assert list(np.argsort(-u.scores)) == truth_order
    assert list(np.argsort(-a.scores)) == truth_order
    assert a.mean_ci_width <= WIDTH_RATIO_MAX * u.mean_ci_width, (a.mean_ci_width, u.mean_ci_width)


def test_allocation_skips_lopsided_pairs():
    adaptive = adaptive_comparisons(bt_oracle(TRUTH, 7), 6, 2250)
    counts = adaptive.comparisons
    assert counts[0, 1] > 5 * counts[0, 5]  # neighbours, not the 1-vs-6 mismatch
    assert adaptive.history["added"].sum() == 2250
    assert adaptive.history["judge_calls"].iloc[-1] == adaptive.judge_calls


def test_invalid_answers_cost_calls_but_not_comparisons():
    rng = np.random.default_rng(0)
    truthful = bt_oracle([0.5, 0.3, 0.2], seed=0)

    def flaky(i, j):
        return None if rng.random() < 0.25 else truthful(i, j)

    res = adaptive_comparisons(flaky, 3, budget=300)
    assert res.wins.sum() == 300 and res.judge_calls > 330


def test_hopeless_oracle_raises():
    with pytest.raises(RuntimeError, match="invalid answers in a row"):
        adaptive_comparisons(lambda i, j: None, 2, budget=20)


def test_budget_checked():
    with pytest.raises(ValueError, match="budget"):
        adaptive_comparisons(bt_oracle([0.5, 0.5]), 4, budget=10)


def test_score_covariance_matches_bootstrap_spread():
    oracle = bt_oracle(TRUTH[:4], seed=3)
    res = uniform_comparisons(oracle, 4, 400)
    boot = bootstrap_bradley_terry(res.wins, 2000, seed=0)
    predicted = np.sqrt(np.diag(score_covariance(boot.scores / 100, res.comparisons)))
    np.testing.assert_allclose(boot.replicates.std(axis=0), predicted, rtol=0.15)


def test_plan_counts_sum_to_batch():
    plan = plan_batch(TRUTH, np.full((6, 6), 20) - 20 * np.eye(6), size=95, step=10)
    assert plan.sum() == 95 and np.all(np.tril(plan) == 0)
