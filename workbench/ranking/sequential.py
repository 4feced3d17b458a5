"""Paired comparisons that stop when the answer is in: anytime-valid tests.

Two policies run the same episodes (task, initial state, seed), so each episode gives one
paired observation. The tests here are e-processes: nonnegative supermartingales under
the null hypothesis "no difference", so by Ville's inequality the chance that one ever
reaches ``1 / alpha`` is at most ``alpha``, however often it is looked at and whenever the
comparison stops (optional stopping is allowed; nothing is "peeked" at).

- **Success** (:func:`discordant_e_value`): only discordant pairs carry information (one
  policy succeeded, the other failed). Under the null each discordant pair is a fair
  coin; the e-value is the likelihood ratio of a mixture over the coin's bias (the prior
  Beta(``MIXTURE``, ``MIXTURE``), symmetric, so it bets on either direction at once)
  against the fair coin. ``MIXTURE`` is 1/4 rather than the Krichevsky-Trofimov 1/2: more
  of the prior lies on large effects, so 6 discordant pairs all one way pass ``1 / 0.05``
  (the KT mixture needs 7; no test symmetric in A and B can decide on 5 at 5%, since 5
  all one way happen by chance with probability 2 / 32). The choice was made on a
  synthetic grid of effects, before any of the data it was then validated on
  (:func:`workbench.studies.sequential_validation.design_grid`).
- **Progress** (:func:`betting_e_value`): paired differences in [-1, 1]; a two-sided
  betting e-process (Waudby-Smith and Ramdas' hedged capital) with predictable bets
  from the differences seen so far.

Several pairs at once are tested at ``alpha / pairs`` each (Bonferroni), so the chance
of any false decision stays below ``alpha``.

>>> round(discordant_e_value(6, 0), 1), round(discordant_e_value(3, 3), 2)
(20.1, 0.19)
>>> decide([1] * 6, [0] * 6, alpha=0.05).winner
'a'
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

METRICS = ("success", "progress")
MAX_BET = 0.75  # the most of its capital a betting test stakes on one paired difference
MIXTURE = 0.25  # the success test's prior on the discordant coin's bias: Beta(1/4, 1/4)
SUCCESS_TEST = f"discordant-beta-mixture-{MIXTURE:g}"  # recorded with each comparison


def log_discordant_e_value(a_only, b_only, prior: float = MIXTURE):
    """The log of :func:`discordant_e_value` (numbers or arrays, elementwise): the
    Beta(prior, prior) mixture's probability of a sequence with ``a_only`` and ``b_only``
    discordant pairs each way over the fair coin's."""
    from scipy.special import gammaln

    n = a_only + b_only
    return (gammaln(a_only + prior) + gammaln(b_only + prior) - gammaln(n + 2 * prior)
            - 2 * math.lgamma(prior) + math.lgamma(2 * prior) + n * math.log(2.0))


def discordant_e_value(a_only: int, b_only: int) -> float:
    """The mixture e-value of ``a_only`` pairs where only A succeeded and ``b_only`` where
    only B did, against "either is as likely" (concordant pairs carry nothing)."""
    return math.exp(float(log_discordant_e_value(a_only, b_only)))


@functools.lru_cache(maxsize=128)
def budget_threshold(horizon: int, alpha: float = 0.05, prior: float = MIXTURE) -> float:
    """The smallest threshold ``c`` for :func:`discordant_e_value` (its mixture's prior
    ``prior``; other values serve the design study only) with
    ``P(max over n <= horizon of E_n >= c) <= alpha`` exactly, under the null (each
    discordant pair a fair coin), for a comparison that can see at most ``horizon``
    discordant pairs (its episode budget bounds them). Ville's ``1 / alpha`` holds for
    any horizon; with the horizon known the exact threshold is lower (so a decision
    comes sooner) at the same type-I error. Computed by dynamic programming over the
    fair walk, bisecting on ``log c``; at most ``1 / alpha``. Where no ``horizon`` pairs
    can pass at ``alpha`` it lies above every attainable e-value (never decides).

    >>> round(budget_threshold(200, 0.05), 2)
    13.45
    >>> budget_threshold(5, 0.05) > discordant_e_value(5, 0)  # 5 pairs cannot decide at 5%
    True
    """
    if not (isinstance(horizon, int) and horizon >= 1):
        raise ValueError(f"horizon: expected a positive integer; got {horizon!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a number in (0, 1); got {alpha!r}")

    def crossing(log_c: float) -> float:
        return float(stopping_distribution(log_c, horizon, 0.5, prior).sum())

    low, high = 0.0, math.log(1.0 / alpha)
    if crossing(high) > alpha:  # cannot happen (Ville), kept as a guard
        return 1.0 / alpha
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (low, middle) if crossing(middle) <= alpha else (middle, high)
    return math.exp(high)


def stopping_distribution(log_c: float, horizon: int, share: float = 0.5,
                          prior: float = MIXTURE) -> np.ndarray:
    """P(the mixture e-value first reaches ``exp(log_c)`` at the n-th discordant pair), for
    n = 0 .. ``horizon``, when each pair goes A's way with chance ``share`` (0.5: the
    null); a tie within rounding counts as crossing."""
    return walk_stopping(
        lambda n, wins: log_discordant_e_value(wins, n - wins, prior) >= log_c - 1e-9,
        horizon, share)


def walk_stopping(decides: Callable[[int, np.ndarray], np.ndarray], horizon: int,
                  share: float = 0.5) -> np.ndarray:
    """P(a test first decides at the n-th discordant pair), n = 0 .. ``horizon``, when each
    pair goes A's way with chance ``share``: the walk of A's wins, absorbed where
    ``decides(n, wins)`` (wins: the array 0 .. n) is True.

    >>> round(float(walk_stopping(lambda n, w: abs(2 * w - n) >= 6, 6).sum()), 4)  # 6 of 6
    0.0312
    """
    alive, stop = np.array([1.0]), np.zeros(horizon + 1)
    for n in range(1, horizon + 1):
        step = np.zeros(n + 1)
        step[1:] += share * alive
        step[:-1] += (1 - share) * alive
        hit = decides(n, np.arange(n + 1))
        stop[n] = float(step[hit].sum())
        step[hit] = 0.0
        alive = step
    return stop


def discordant_interval(a_only: int, b_only: int, alpha: float = 0.05,
                        grid: int = 2001) -> tuple[float, float]:
    """The anytime-valid ``1 - alpha`` confidence sequence for the share of discordant
    pairs A wins: every ``q`` whose mixture e-value against "A wins with chance q"
    stays below ``1 / alpha`` (on a grid of ``grid`` points). (0, 1) before any
    discordant pair.

    >>> [round(v, 2) for v in discordant_interval(7, 0)]
    [0.55, 1.0]
    """
    from scipy.special import xlogy

    q = np.linspace(0.0, 1.0, grid)
    n = a_only + b_only
    log_mixture = float(log_discordant_e_value(a_only, b_only)) - n * math.log(2.0)
    with np.errstate(divide="ignore"):
        log_null = xlogy(a_only, q) + xlogy(b_only, 1.0 - q)
    kept = q[log_mixture - log_null < math.log(1.0 / alpha)]
    return (float(kept.min()), float(kept.max())) if kept.size else (0.0, 1.0)


def betting_e_process(differences: Sequence[float]) -> np.ndarray:
    """The two-sided betting e-process for paired differences in [-1, 1] having mean 0,
    after each difference: the average capital of a bettor on "A better" and one on "B
    better", each staking a predictable fraction (from the differences before it, capped
    at ``MAX_BET``) of its capital."""
    up = down = 1.0
    total = square = 0.0
    out = np.empty(len(differences))
    for t, d in enumerate(differences):
        if t:
            mean = total / t
            bet = min(MAX_BET, abs(mean) / (square / t + 1e-12))
            up *= 1.0 + (bet if mean > 0 else 0.0) * d
            down *= 1.0 - (bet if mean < 0 else 0.0) * d
        total, square = total + d, square + d * d
        out[t] = 0.5 * (up + down)
    return out


def betting_e_value(differences: Sequence[float]) -> float:
    """:func:`betting_e_process` after the last difference (1.0 for none)."""
    process = betting_e_process(differences)
    return float(process[-1]) if len(process) else 1.0


@dataclass(frozen=True)
class Decision:
    """Where a paired test stands: ``episodes`` paired observations, its e-value against
    ``threshold`` (1 / alpha), and ``winner`` ("a", "b" or None while undecided)."""

    episodes: int
    statistic: float
    threshold: float
    winner: str | None
    a_only: int
    b_only: int
    mean_a: float
    mean_b: float
    interval: tuple[float, float] | None = None
    """Success: the anytime-valid 1 - alpha interval for the share of discordant episodes
    A wins (0.5: no difference); None for progress."""

    @property
    def decided(self) -> bool:
        return self.winner is not None


def _bounded(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, np.float64)
    if array.ndim != 1 or not np.all(np.isfinite(array)) or array.size and (
            array.min() < 0 or array.max() > 1):
        raise ValueError(f"{name}: expected a 1-D sequence of finite values in [0, 1]; got "
                         f"{array.shape if array.ndim != 1 else 'values outside it'}")
    return array


def decide(a: Sequence[float], b: Sequence[float], alpha: float = 0.05,
           metric: str = "success", horizon: int | None = None) -> Decision:
    """The test of the paired outcomes so far (``a[i]`` and ``b[i]`` from the same episode,
    in the order they were planned): decided when the e-value reaches ``1 / alpha``, for
    the side with the better total. ``horizon`` (success only): the most paired episodes
    the comparison may run; the threshold is then :func:`budget_threshold` for it."""
    if metric not in METRICS:
        raise ValueError(f"metric: expected one of {list(METRICS)}; got {metric!r}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValueError(f"alpha: expected a number in (0, 1); got {alpha!r}")
    x, y = _bounded(a, "a"), _bounded(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired outcomes: expected as many for a as for b; got {x.size} "
                         f"and {y.size}")
    if metric == "success":
        a_only, b_only = int(np.sum((x > 0.5) & (y <= 0.5))), int(np.sum((y > 0.5) & (x <= 0.5)))
        statistic = discordant_e_value(a_only, b_only)
    else:
        a_only, b_only = int(np.sum(x > y)), int(np.sum(y > x))
        statistic = betting_e_value((x - y).tolist())
    threshold = _threshold(alpha, metric, horizon)
    lead = float(x.sum() - y.sum())
    winner = None if statistic < threshold or lead == 0 else ("a" if lead > 0 else "b")
    interval = discordant_interval(a_only, b_only, alpha) if metric == "success" else None
    return Decision(int(x.size), float(statistic), threshold, winner, a_only, b_only,
                    float(x.mean()) if x.size else math.nan,
                    float(y.mean()) if y.size else math.nan, interval)


def _threshold(alpha: float, metric: str, horizon: int | None) -> float:
    return budget_threshold(horizon, alpha) if horizon and metric == "success" else 1 / alpha


def first_decision(a: Sequence[float], b: Sequence[float], alpha: float = 0.05,
                   metric: str = "success", every: int = 1,
                   horizon: int | None = None) -> Decision:
    """The test looked at after every ``every`` paired episodes: the first decision, or the
    undecided state at the end of the sequences. The e-process is computed once over the
    whole sequence (its value after ``k`` episodes depends only on those ``k``)."""
    final = decide(a, b, alpha, metric, horizon)  # checks the input
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    n = x.size
    if metric == "success":
        a_only = np.cumsum((x > 0.5) & (y <= 0.5))
        b_only = np.cumsum((y > 0.5) & (x <= 0.5))
        process = np.exp(log_discordant_e_value(a_only, b_only))
    else:
        process = betting_e_process((x - y).tolist())
    looks = np.array(list(range(every, n + 1, every)) + ([n] if n % every else []), int)
    lead = np.cumsum(x - y)
    threshold = _threshold(alpha, metric, horizon)
    hits = looks[(process[looks - 1] >= threshold) & (lead[looks - 1] != 0)] if n else looks
    return decide(a[:hits[0]], b[:hits[0]], alpha, metric, horizon) if hits.size else final


def fixed_size_episodes(p_a_only: float, p_b_only: float, alpha: float = 0.05,
                        power: float = 0.8, limit: int = 100_000) -> int | None:
    """Paired episodes a fixed-size exact McNemar test at ``alpha`` (two-sided) needs to
    detect the difference with ``power``, given the chances that only A or only B
    succeeds on an episode; None when it would need more than ``limit``.

    >>> fixed_size_episodes(0.5, 0.0)
    15
    """
    from scipy import stats

    p_discordant = p_a_only + p_b_only
    if p_discordant <= 0 or p_a_only == p_b_only:
        return None
    share = max(p_a_only, p_b_only) / p_discordant
    n = 1
    while n <= limit:
        # discordant pairs among n episodes (where the binomial has its mass), and the
        # exact test's power given each count
        low, high = (int(v) for v in stats.binom.interval(1 - 1e-12, n, p_discordant))
        k = np.arange(max(low, 0), high + 1)
        if float(stats.binom.pmf(k, n, p_discordant) @ _mcnemar_power(k, share, alpha)) >= power:
            return n
        n = n + 1 if n < 64 else int(n * 1.05) + 1
    return None


def _mcnemar_power(k: np.ndarray, share: float, alpha: float) -> np.ndarray:
    """For each count ``k`` of discordant pairs, the chance that the exact two-sided
    binomial test at ``alpha`` rejects when each goes A's way with probability ``share``:
    it rejects at ``c`` or fewer A-wins and at ``k - c`` or more, ``c`` the largest count
    whose lower tail under a fair coin is at most ``alpha / 2``."""
    from scipy import stats

    k = np.asarray(k, np.int64)
    c = stats.binom.ppf(alpha / 2, k, 0.5).astype(np.int64)
    c = np.where(stats.binom.cdf(c, k, 0.5) <= alpha / 2, c, c - 1)
    power = np.where(c >= 0, stats.binom.cdf(c, k, share) + stats.binom.sf(k - c - 1, k, share),
                     0.0)
    return np.where(k > 0, power, 0.0)


__all__ = ["Decision", "METRICS", "MIXTURE", "SUCCESS_TEST", "betting_e_value",
           "budget_threshold", "decide", "discordant_e_value", "discordant_interval",
           "first_decision", "fixed_size_episodes", "log_discordant_e_value",
           "stopping_distribution", "walk_stopping"]
