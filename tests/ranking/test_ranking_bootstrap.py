"""Bootstrap of BT scores: resampling scheme, equivalence with a loop, coverage."""

import numpy as np
import pytest

from workbench.ranking.bootstrap import bootstrap_bradley_terry, resample_wins
from workbench.ranking.bradley_terry import DisconnectedComparisonsWarning, fit_bradley_terry

COVERAGE_RANGE = (0.88, 0.99)  # of nominal 95% intervals over repeated experiments
LOOP_TOL = 1e-6  # vectorised replicates vs one-at-a-time fits, score scale 0-100


def simulate(truth: np.ndarray, per_pair: int, rng: np.random.Generator) -> np.ndarray:
    n = len(truth)
    wins = np.zeros((n, n), np.int64)
    for i in range(n):
        for j in range(i + 1, n):
            k = rng.binomial(per_pair, truth[i] / (truth[i] + truth[j]))
            wins[i, j], wins[j, i] = k, per_pair - k
    return wins


WINS = simulate(np.array([0.4, 0.3, 0.2, 0.1]), 150, np.random.default_rng(0))


def test_resampling_preserves_pair_totals_and_varies_wins():
    reps = resample_wins(WINS, n_boot=50, seed=1)
    totals = reps + reps.transpose(0, 2, 1)
    np.testing.assert_array_equal(totals, np.broadcast_to(WINS + WINS.T, totals.shape))
    assert len({tuple(r.ravel()) for r in reps}) > 40
    assert np.all(np.diagonal(reps, axis1=1, axis2=2) == 0)


def test_resampling_is_binomial_around_observed_share():
    reps = resample_wins([[0, 30], [70, 0]], n_boot=4000, seed=2)
    assert reps[:, 0, 1].mean() == pytest.approx(30, abs=0.5)
    assert reps[:, 0, 1].var() == pytest.approx(100 * 0.3 * 0.7, rel=0.1)


def test_vectorised_replicates_equal_a_loop_of_single_fits():
    res = bootstrap_bradley_terry(WINS, n_boot=40, seed=3)
    reps = resample_wins(WINS, n_boot=40, seed=3)  # same seed, same draws
    loop = np.array([fit_bradley_terry(r).scores for r in reps])
    np.testing.assert_allclose(res.replicates, loop, atol=LOOP_TOL)


def test_result_fields():
    res = bootstrap_bradley_terry(WINS, n_boot=200, seed=4)
    np.testing.assert_allclose(res.scores, fit_bradley_terry(WINS).scores)
    np.testing.assert_allclose(res.lower, np.percentile(res.replicates, 2.5, axis=0))
    np.testing.assert_allclose(res.upper, np.percentile(res.replicates, 97.5, axis=0))
    assert res.mean_ci_width == pytest.approx(np.mean(res.upper - res.lower))
    np.testing.assert_allclose(res.replicates.sum(axis=1), 100.0)
    assert res.converged_share == 1.0 and res.n_boot == 200


def test_seeded_and_reproducible():
    a = bootstrap_bradley_terry(WINS, n_boot=100, seed=5)
    b = bootstrap_bradley_terry(WINS, n_boot=100, seed=5)
    c = bootstrap_bradley_terry(WINS, n_boot=100, seed=6)
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert not np.array_equal(a.replicates, c.replicates)


def test_more_comparisons_narrow_the_intervals():
    truth = np.array([0.4, 0.3, 0.2, 0.1])
    small = bootstrap_bradley_terry(simulate(truth, 50, np.random.default_rng(1)), 300, seed=0)
    large = bootstrap_bradley_terry(simulate(truth, 800, np.random.default_rng(1)), 300, seed=0)
    assert large.mean_ci_width < small.mean_ci_width / 2.5  # about sqrt(16) = 4 narrower


def test_coverage_of_true_scores_is_near_nominal():
    truth = np.array([0.4, 0.3, 0.2, 0.1])
    covered = []
    for seed in range(100):
        wins = simulate(truth, 200, np.random.default_rng(1000 + seed))
        res = bootstrap_bradley_terry(wins, n_boot=300, seed=seed)
        covered.append((res.lower <= 100 * truth) & (100 * truth <= res.upper))
    rate = float(np.mean(covered))
    assert COVERAGE_RANGE[0] <= rate <= COVERAGE_RANGE[1], rate


def test_zero_win_policy_stays_at_zero():
    wins = WINS.copy()
    wins[3, :] = 0
    res = bootstrap_bradley_terry(wins, n_boot=50, seed=0)
    assert np.all(res.replicates[:, 3] == 0) and res.upper[3] == 0


def test_disconnected_graph_warns_and_keeps_component_masses():
    wins = np.zeros((4, 4), np.int64)
    wins[0, 1], wins[1, 0], wins[2, 3], wins[3, 2] = 30, 10, 5, 15
    with pytest.warns(DisconnectedComparisonsWarning):
        res = bootstrap_bradley_terry(wins, n_boot=50, seed=0)
    np.testing.assert_allclose(res.replicates[:, :2].sum(axis=1), 50.0)


@pytest.mark.parametrize("kwargs, message", [({"level": 1.2}, "level"), ({"n_boot": 0}, "n_boot")])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_bradley_terry(WINS, **kwargs)


def test_non_integer_counts_rejected():
    with pytest.raises(ValueError, match="integer"):
        bootstrap_bradley_terry([[0, 1.5], [2, 0]])
