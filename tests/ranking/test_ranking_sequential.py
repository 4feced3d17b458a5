"""Anytime-valid paired tests (workbench.ranking.sequential): under the null they decide
at most alpha of the time even when looked at after every episode, and a clear difference
is decided in fewer episodes than a fixed-size test of the same alpha needs."""

import numpy as np
import pytest
from scipy.special import gammaln

from workbench.ranking.sequential import (MIXTURE, betting_e_process, budget_threshold,
                                          decide, discordant_e_value, first_decision,
                                          fixed_size_episodes)

ALPHA = 0.05
SIMULATIONS = 1000
EPISODES = 200


def mixture_process(a, b, prior=MIXTURE):
    """discordant_e_value after every paired episode, vectorised over simulations: the
    Beta(prior, prior) mixture's likelihood ratio against the fair coin, written out."""
    a_only = np.cumsum((a == 1) & (b == 0), axis=-1)
    b_only = np.cumsum((a == 0) & (b == 1), axis=-1)
    n = a_only + b_only
    return np.exp(gammaln(a_only + prior) + gammaln(b_only + prior) - gammaln(n + 2 * prior)
                  - 2 * gammaln(prior) + gammaln(2 * prior) + n * np.log(2.0))


def null_pairs(rng, shape):
    """Two copies of one policy: each episode's success chance drawn per episode (tasks
    and initial states differ), both copies' outcomes independent given it."""
    p = rng.uniform(0.1, 0.9, shape)
    return (rng.random(shape) < p).astype(int), (rng.random(shape) < p).astype(int)


def test_the_vectorised_process_is_the_published_one():
    rng = np.random.default_rng(0)
    a, b = null_pairs(rng, (3, 40))
    for k in range(3):
        for end in (1, 17, 40):
            x, y = a[k, :end], b[k, :end]
            assert mixture_process(x, y)[-1] == pytest.approx(
                discordant_e_value(int(((x == 1) & (y == 0)).sum()),
                                   int(((x == 0) & (y == 1)).sum())))


def test_success_type_one_error_under_the_null_looking_after_every_episode():
    a, b = null_pairs(np.random.default_rng(1), (SIMULATIONS, EPISODES))
    ever = (mixture_process(a, b) >= 1 / ALPHA).any(axis=1)
    assert ever.mean() <= ALPHA, ever.mean()


def test_the_budget_threshold_keeps_alpha_and_uses_the_room_ville_leaves():
    # 4,000 null comparisons of 200 paired episodes, looked at after every episode, the
    # threshold exact for that budget: type-I at most alpha, and more of it spent than at
    # 1 / alpha (the room the calibration takes; 1 / alpha holds for any horizon)
    a, b = null_pairs(np.random.default_rng(11), (4 * SIMULATIONS, EPISODES))
    process = mixture_process(a, b)
    threshold = budget_threshold(EPISODES, ALPHA)
    calibrated = (process >= threshold).any(axis=1).mean()
    ville = (process >= 1 / ALPHA).any(axis=1).mean()
    assert threshold < 0.75 / ALPHA
    assert ville < calibrated <= ALPHA, (ville, calibrated)


def test_the_budget_threshold_is_exact_on_every_sequence_of_a_short_budget():
    # every one of the 2^18 sequences of 18 discordant pairs (a fair coin each under the
    # null), counted rather than sampled: the share that ever reach the threshold for a
    # budget of 18 is at most alpha, and more than Ville's 1 / alpha lets through
    horizon = 18
    coin = (np.arange(2 ** horizon)[:, None] >> np.arange(horizon)) & 1
    process = mixture_process(coin, 1 - coin)
    exact = (process >= budget_threshold(horizon, ALPHA) * (1 - 1e-9)).any(axis=1).mean()
    ville = (process >= 1 / ALPHA).any(axis=1).mean()
    assert ville < exact <= ALPHA, (ville, exact)


def test_a_known_budget_decides_a_clear_difference_sooner():
    rng = np.random.default_rng(13)
    used = {None: [], EPISODES: []}
    for _ in range(200):
        a = (rng.random(EPISODES) < 0.7).astype(int)
        b = (rng.random(EPISODES) < 0.45).astype(int)
        for horizon in used:
            state = first_decision(a, b, ALPHA, horizon=horizon)
            assert state.winner in ("a", None)
            used[horizon].append(state.episodes)
            if horizon:
                assert state.threshold == pytest.approx(budget_threshold(EPISODES, ALPHA))
    assert np.median(used[EPISODES]) < np.median(used[None])
    assert all(k <= v for k, v in zip(used[EPISODES], used[None]))  # a lower bar, same path


def test_progress_type_one_error_under_the_null_looking_after_every_episode():
    rng = np.random.default_rng(2)
    quality = rng.beta(2, 2, (SIMULATIONS, EPISODES))  # the episode's difficulty
    a = np.clip(quality + rng.normal(0, 0.15, quality.shape), 0, 1)
    b = np.clip(quality + rng.normal(0, 0.15, quality.shape), 0, 1)
    ever = [(betting_e_process((x - y).tolist()) >= 1 / ALPHA).any() for x, y in zip(a, b)]
    assert np.mean(ever) <= ALPHA, np.mean(ever)


def test_a_clear_difference_is_decided_sooner_than_a_fixed_size_test_needs():
    rng = np.random.default_rng(3)
    p_a, p_b = 0.85, 0.35
    used, wrong = [], 0
    for _ in range(200):
        a = (rng.random(EPISODES) < p_a).astype(int)
        b = (rng.random(EPISODES) < p_b).astype(int)
        state = first_decision(a, b, ALPHA)
        assert state.decided
        used.append(state.episodes)
        wrong += state.winner != "a"
    fixed = fixed_size_episodes(p_a * (1 - p_b), p_b * (1 - p_a), ALPHA)
    assert wrong == 0
    assert np.median(used) < fixed, (np.median(used), fixed)


def test_progress_decides_a_better_policy():
    rng = np.random.default_rng(4)
    a = np.clip(rng.normal(0.7, 0.1, 100), 0, 1)
    b = np.clip(rng.normal(0.4, 0.1, 100), 0, 1)
    state = first_decision(a, b, ALPHA, metric="progress")
    assert state.winner == "a" and state.episodes < 30, state


@pytest.mark.parametrize("a, b, alpha, metric, message", [
    ([1, 0], [1], 0.05, "success", "expected as many for a as for b"),
    ([1, float("nan")], [1, 0], 0.05, "success", "finite values in"),
    ([1, 2], [1, 0], 0.05, "success", "finite values in"),
    ([1], [0], 0.0, "success", "alpha: expected a number in"),
    ([1], [0], float("inf"), "success", "alpha: expected a number in"),
    ([1], [0], 0.05, "median", "metric: expected one of"),
    ([[1]], [[0]], 0.05, "success", "a 1-D sequence"),
])
def test_bad_input_is_one_clear_error(a, b, alpha, metric, message):
    with pytest.raises(ValueError, match=message):
        decide(a, b, alpha, metric)


def test_the_interval_covers_the_true_share_at_all_times_in_all_but_alpha_of_runs():
    from workbench.ranking.sequential import discordant_interval

    rng = np.random.default_rng(5)
    share, misses = 0.7, 0
    for _ in range(300):
        wins = rng.random(60) < share
        a_only = np.cumsum(wins)
        ever_missed = any(not (lo <= share <= hi) for lo, hi in
                          (discordant_interval(int(k), int(n - k), ALPHA, grid=401)
                           for n, k in zip(range(1, 61, 6), a_only[::6])))
        misses += ever_missed
    assert misses / 300 <= ALPHA, misses
    lo, hi = discordant_interval(7, 0, ALPHA)
    assert lo > 0.5 and hi == 1.0  # decided for A: 0.5 (no difference) is excluded


def test_six_discordant_pairs_all_one_way_decide_and_five_never_do():
    # five all one way happen by chance with probability 2 / 32 > 5%, so no test symmetric
    # in A and B may decide on them; six (2 / 64) may, and the Beta(1/4) mixture does
    # (the Krichevsky-Trofimov mixture, prior 1/2, needs seven)
    assert mixture_process(np.ones(6), np.zeros(6), prior=0.5)[-1] < 1 / ALPHA
    for horizon in (None, 6, 16, 200, 900):
        assert decide([1] * 6, [0] * 6, ALPHA, horizon=horizon).winner == "a"
        assert decide([0] * 6, [1] * 6, ALPHA, horizon=horizon).winner == "b"
        assert not decide([1] * 5, [0] * 5, ALPHA, horizon=horizon).decided
