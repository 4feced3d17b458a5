"""Bradley-Terry MM fit against choix (an independent oracle) and on awkward data."""

import warnings

import choix
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from workbench.ranking.bradley_terry import (ConvergenceWarning, DisconnectedComparisonsWarning,
                                             fit_bradley_terry, fit_bradley_terry_batch)

AGREE_TOL = 1e-6  # normalised strengths, ours vs choix


def choix_strengths(wins: np.ndarray) -> np.ndarray:
    """choix's ML fit of the same data, exponentiated and normalised to sum 1."""
    theta = choix.ilsr_pairwise_dense(wins.astype(float), max_iter=10_000, tol=1e-12)
    b = np.exp(theta - theta.max())
    return b / b.sum()


def random_wins(n: int, per_pair: int, seed: int, density: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    strength = rng.lognormal(0, 1, n)
    wins = np.zeros((n, n), np.int64)
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < density:
                k = rng.binomial(per_pair, strength[i] / (strength[i] + strength[j]))
                wins[i, j], wins[j, i] = k, per_pair - k
    return wins


@pytest.mark.parametrize("n, per_pair, seed", [(2, 30, 0), (3, 5, 1), (6, 2000, 2), (6, 20, 3),
                                               (10, 50, 4), (25, 40, 5)])
def test_agrees_with_choix_on_random_data(n, per_pair, seed):
    wins = random_wins(n, per_pair, seed)
    assert_strongly_connected(wins)
    res = fit_bradley_terry(wins)
    assert res.converged
    np.testing.assert_allclose(res.strengths, choix_strengths(wins), atol=AGREE_TOL)
    np.testing.assert_allclose(res.scores, 100 * res.strengths)
    np.testing.assert_allclose(res.theta, np.log(res.strengths))
    assert res.strengths.sum() == pytest.approx(1.0)


def assert_strongly_connected(wins):
    """Hunter's condition for a finite MLE: every policy beats, indirectly, every other."""
    k, _ = connected_components(csr_matrix(wins > 0), directed=True, connection="strong")
    assert k == 1


def test_agrees_with_choix_on_sparse_graph():
    wins = random_wins(12, 30, seed=7, density=0.4)
    assert_strongly_connected(wins)
    np.testing.assert_allclose(fit_bradley_terry(wins).strengths, choix_strengths(wins),
                               atol=AGREE_TOL)


def test_agrees_with_choix_on_100_policies():
    wins = random_wins(100, 6, seed=11)
    assert_strongly_connected(wins)
    res = fit_bradley_terry(wins)
    assert res.converged
    np.testing.assert_allclose(res.strengths, choix_strengths(wins), atol=AGREE_TOL)


def test_two_policies_closed_form():
    res = fit_bradley_terry([[0, 7], [3, 0]])
    np.testing.assert_allclose(res.strengths, [0.7, 0.3], atol=1e-9)


def test_policy_without_wins_scores_zero_and_rest_matches_choix_without_it():
    wins = random_wins(5, 40, seed=3)
    wins[4, :] = 0  # policy 4 never wins; the others still beat it sometimes
    res = fit_bradley_terry(wins)
    assert res.scores[4] == 0.0 and np.all(np.isfinite(res.theta))
    assert not np.isnan(res.scores).any()
    rest = choix_strengths(wins[:4, :4])
    np.testing.assert_allclose(res.strengths[:4], rest, atol=AGREE_TOL)


def test_all_zero_wins_row_and_column_is_disconnected_and_zero():
    wins = random_wins(4, 30, seed=1)
    wins[3, :] = wins[:, 3] = 0  # never compared
    with pytest.warns(DisconnectedComparisonsWarning):
        res = fit_bradley_terry(wins)
    assert res.scores[3] == 0.0
    np.testing.assert_allclose(res.strengths[:3], choix_strengths(wins[:3, :3]), atol=AGREE_TOL)


def test_disconnected_graph_warns_and_fits_each_component():
    a, b = random_wins(3, 50, seed=5), random_wins(2, 50, seed=6)
    wins = np.zeros((5, 5), np.int64)
    wins[:3, :3], wins[3:, 3:] = a, b
    with pytest.warns(DisconnectedComparisonsWarning, match="2 components"):
        res = fit_bradley_terry(wins)
    # within each component: choix's answer; across: mass proportional to size
    np.testing.assert_allclose(res.strengths[:3] / res.strengths[:3].sum(), choix_strengths(a),
                               atol=AGREE_TOL)
    np.testing.assert_allclose(res.strengths[3:] / res.strengths[3:].sum(), choix_strengths(b),
                               atol=AGREE_TOL)
    assert res.strengths[:3].sum() == pytest.approx(0.6)


def test_undefeated_policy_warns_about_convergence_without_nan():
    wins = np.array([[0, 5, 5], [0, 0, 3], [0, 2, 0]])
    with pytest.warns(ConvergenceWarning):
        res = fit_bradley_terry(wins, max_iter=50)
    assert not res.converged and np.all(np.isfinite(res.scores))
    assert res.scores[0] > 90


def test_connected_data_raises_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_bradley_terry(random_wins(4, 20, seed=2))


@pytest.mark.parametrize("bad, message", [
    ([[0, -1], [1, 0]], "non-negative"),
    ([[0, 1, 2], [1, 0, 1]], "square"),
    ([[0, np.nan], [1, 0]], "NaN or inf"),
    ([[0, np.inf], [1, 0]], "NaN or inf"),
    ([["a", "b"], ["c", "d"]], "numeric"),
    ([[1, 2], [3, 0]], "diagonal"),
    ([[0]], "at least 2"),
    ([0, 1], "square"),
])
def test_bad_input_raises_clear_value_error(bad, message):
    with pytest.raises(ValueError, match=message):
        fit_bradley_terry(bad)


def test_batch_matches_single_fits():
    stack = np.stack([random_wins(5, 30, seed=s) for s in range(8)])
    batch = fit_bradley_terry_batch(stack)
    assert batch.strengths.shape == (8, 5) and batch.converged.all()
    for k in range(8):
        np.testing.assert_allclose(batch.strengths[k], fit_bradley_terry(stack[k]).strengths,
                                   atol=AGREE_TOL)


def test_batch_warns_when_matrices_differ_in_pattern():
    stack = np.stack([random_wins(3, 10, seed=1), random_wins(3, 10, seed=2)])
    stack[1, 0, 1] = stack[1, 1, 0] = 0
    with pytest.warns(DisconnectedComparisonsWarning, match="lack pairs"):
        fit_bradley_terry_batch(stack)


def test_batch_rejects_2d_input():
    with pytest.raises(ValueError, match=r"\(batch, n, n\)"):
        fit_bradley_terry_batch(np.zeros((3, 3)))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 7))
def test_scores_invariant_to_relabelling(seed, n):
    wins = random_wins(n, 25, seed) + 1 - np.eye(n, dtype=np.int64)  # strongly connected
    perm = np.random.default_rng(seed).permutation(n)
    original = fit_bradley_terry(wins).scores
    relabelled = fit_bradley_terry(wins[np.ix_(perm, perm)]).scores
    np.testing.assert_allclose(relabelled, original[perm], atol=1e-6)
