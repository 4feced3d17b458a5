"""The boundary study (workbench.studies.sequential_design): the Bayes-optimal boundary is
exactly valid, and the design grid compares it with the mixture test."""

import numpy as np
import pytest

from workbench.ranking.sequential import budget_threshold, stopping_distribution
from workbench.studies.sequential_design import (bayes_boundary, boundary_stopping,
                                                 boundary_study, boundary_type_one)

WALKS = 40_000  # simulated fair walks for the type-I check
SAMPLING_SIGMAS = 4.0  # how far a simulated rate may stray from the exact one


def _simulated_rate(bound: np.ndarray, share: float, seed: int) -> float:
    """Decisions of the boundary on simulated walks, counted without the exact DP."""
    rng = np.random.default_rng(seed)
    steps = np.where(rng.random((WALKS, len(bound) - 1)) < share, 1, -1)
    lead = np.abs(np.cumsum(steps, axis=1))
    return float((lead >= np.asarray(bound[1:])[None, :]).any(axis=1).mean())


@pytest.mark.parametrize("horizon", [30, 150])
def test_the_bayes_boundary_is_valid_and_its_exact_error_matches_simulation(horizon):
    bound = bayes_boundary(horizon, 0.05)
    exact = boundary_type_one(bound)
    # at most alpha, and the bisection spends most of it
    assert 0.035 < exact <= 0.05
    simulated = _simulated_rate(bound, 0.5, seed=horizon)
    assert abs(simulated - exact) < SAMPLING_SIGMAS * np.sqrt(exact * (1 - exact) / WALKS)
    # under an effect the exact decision rate matches simulation too
    power = float(boundary_stopping(bound, 0.8).sum())
    assert abs(_simulated_rate(bound, 0.8, seed=1) - power) < \
        SAMPLING_SIGMAS * np.sqrt(power * (1 - power) / WALKS)


def test_six_one_way_decide_and_a_tie_never_does():
    bound = bayes_boundary(200, 0.05)
    assert bound[6] == 6 and (bound[1:6] > np.arange(1, 6)).all()  # 5 of 5 cannot decide
    assert (bound >= 1).all()
    # closed upward: a lead above the boundary decides at every n (7 of 7, 8 of 8, ...)
    for n in range(6, 40):
        assert bound[n] <= n


def test_the_study_puts_both_tests_through_the_same_grid():
    table = boundary_study(horizon=120)
    assert set(table["test"]) == {"beta-0.25", "bayes"} and len(table) == 2 * 20
    mixture = table[table["test"] == "beta-0.25"].reset_index(drop=True)
    # the mixture's rows are the design grid's own computation at its budget threshold
    log_c = np.log(budget_threshold(120, 0.05))
    assert mixture["type_one"].iloc[0] == pytest.approx(
        stopping_distribution(log_c, 120).sum())
    bayes = table[table["test"] == "bayes"].reset_index(drop=True)
    assert (bayes["type_one"] <= 0.05).all()
    # the Bayes boundary is optimal for its prior, not for every effect: it must not
    # lose on the grid's average decision rate
    assert bayes["decided"].mean() >= mixture["decided"].mean() - 0.01
