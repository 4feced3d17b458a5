"""Validation metrics: MMRV by hand and against SimplerEnv's loops, correlations, rates."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from workbench.ranking.metrics import (agreement_rate, mean_interval_width, mmrv,
                                       order_swap_consistency, pearson_r, spearman_rho,
                                       success_rates, wilson_interval, win_rate_matrix)

EXACT = 1e-12


def simpler_env_mmrv(perf_sim, perf_real):
    """SimplerEnv's ``mean_maximum_rank_violation`` (simpler_env/utils/metrics.py), as written."""
    perf_sim, perf_real = np.array(perf_sim), np.array(perf_real)
    rank_violations = []
    for i in range(len(perf_sim)):
        rank_violation = 0.0
        for j in range(len(perf_sim)):
            if (perf_sim[i] > perf_sim[j]) != (perf_real[i] > perf_real[j]):
                rank_violation = max(rank_violation, np.abs(perf_real[i] - perf_real[j]))
        rank_violations.append(rank_violation)
    return np.mean(rank_violations)


@pytest.mark.parametrize("real, evaluated, expected", [
    # no inversion
    ([0.1, 0.5, 0.9], [1, 2, 3], 0.0),
    # one adjacent swap of 0.1: charged to both policies -> (0 + 0.1 + 0.1) / 3
    ([0.2, 0.5, 0.6], [1, 3, 2], 0.2 / 3),
    # full reversal: policy 0 and 2 each 0.4, policy 1 max(0.1, 0.3) = 0.3
    ([0.1, 0.2, 0.5], [3, 2, 1], (0.4 + 0.3 + 0.4) / 3),
    # evaluated ties everything: each policy's largest gap to a weaker one: 0, 0.1, 0.5
    ([0.0, 0.1, 0.5], [7, 7, 7], 0.6 / 3),
    # real ties, evaluated orders them: violation magnitude |real gap| = 0
    ([0.3, 0.3, 0.6], [1, 2, 3], 0.0),
    # tie in evaluated between policies 1, 2 (real 0.4, 0.5): only policy 2 is charged 0.1
    ([0.1, 0.4, 0.5], [1, 2, 2], 0.1 / 3),
])
def test_mmrv_hand_cases(real, evaluated, expected):
    assert mmrv(real, evaluated) == pytest.approx(expected, abs=EXACT)
    assert mmrv(real, evaluated) == pytest.approx(simpler_env_mmrv(evaluated, real), abs=EXACT)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=2, max_size=8))
def test_mmrv_matches_simpler_env_including_ties(pairs):
    real = [r / 5 for r, _ in pairs]
    evaluated = [e for _, e in pairs]
    assert mmrv(real, evaluated) == pytest.approx(simpler_env_mmrv(evaluated, real), abs=EXACT)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=10))
def test_ranking_against_itself_has_mmrv_zero(values):
    assert mmrv(values, values) == 0.0
    assert mmrv(values, [2 * v for v in values]) == 0.0  # order-preserving rescaling (exact)


def test_correlations_agree_with_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.random(8), rng.random(8)
    assert spearman_rho(a, b) == pytest.approx(stats.spearmanr(a, b).statistic)
    assert pearson_r(a, b) == pytest.approx(stats.pearsonr(a, b).statistic)
    assert spearman_rho([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 6, 5]) == pytest.approx(1 - 6 * 2 / 210)


@pytest.mark.parametrize("func", [spearman_rho, pearson_r, mmrv])
def test_metric_inputs_checked(func):
    with pytest.raises(ValueError, match="equal length"):
        func([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2"):
        func([1], [1])
    with pytest.raises(ValueError, match="finite"):
        func([1, np.nan], [1, 2])


def test_interval_width():
    assert mean_interval_width([10, 20], [12, 26]) == 4.0
    with pytest.raises(ValueError):
        mean_interval_width([3], [1])


def test_agreement_and_order_swap():
    assert agreement_rate(["A", "B", "B"], ["A", "B", "A"]) == pytest.approx(2 / 3)
    assert order_swap_consistency(["A", "B", "A", None], ["B", "A", "A", "B"]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="'A', 'B' or None"):
        agreement_rate(["A", "x"], ["A", "B"])
    with pytest.raises(ValueError, match="no pair"):
        agreement_rate([None], ["A"])


def test_win_rate_matrix():
    rates = win_rate_matrix([[0, 3, 0], [1, 0, 0], [0, 0, 0]])
    assert rates[0, 1] == 0.75 and rates[1, 0] == 0.25
    assert np.isnan(rates[0, 2]) and np.isnan(rates[1, 1])


def test_wilson_interval_known_values():
    # Wilson 95% interval for 8/10 and for 0/20 (textbook values)
    lo, hi = wilson_interval([8, 0], [10, 20])
    np.testing.assert_allclose(lo, [0.4902, 0.0], atol=1e-4)
    np.testing.assert_allclose(hi, [0.9433, 0.1611], atol=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_success_rates_table():
    df = pd.DataFrame({"policy": ["a"] * 4 + ["b"] * 2, "task": ["t"] * 6,
                       "success": [1, 1, 0, 1, 0, 0]})
    table = success_rates(df)
    assert table["rate"].tolist() == [0.75, 0.0]
    assert (table["lower"] <= table["rate"]).all() and (table["rate"] <= table["upper"]).all()
    assert len(success_rates(df, by=["policy", "task"])) == 2
