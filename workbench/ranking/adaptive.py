"""Adaptive allocation of judge calls: compare where the ranking is still uncertain.

After a small uniform warm-up, each round fits BT and plans the next ``batch``
comparisons greedily, ``step`` at a time, on the pair that most reduces

    sum_i Var(s_i)  +  sum over adjacent-in-ranking pairs (a, c) whose order is not yet
    settled (|s_a - s_c| < z * sd) of Var(s_a - s_c)

with Var from the BT Fisher information (scores s = 100 b on the 0-100 scale): a
comparison of pair (i, j) adds ``b_i b_j / (b_i + b_j)^2`` to the information on
``theta_i - theta_j``. Lopsided pairs carry little information, near-tied neighbours a
lot, so the calls go to where the order and the intervals are decided.

The gain over uniform sampling depends on the strengths: with well-spread policies
(many lopsided pairs, as in R2S-Eval's real-to-sim scores) half the calls give about the
same interval width; with near-equal policies uniform allocation is already close to
optimal and no allocation halves the calls.

>>> res = adaptive_comparisons(bt_oracle([0.6, 0.3, 0.1], seed=0), 3, budget=300)
>>> res.judge_calls, int(res.wins.sum())
(300, 300)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from workbench.ranking.bradley_terry import fit_bradley_terry

Oracle = Callable[[int, int], "bool | None"]
MAX_INVALID_IN_A_ROW = 20


def bt_oracle(strengths: ArrayLike, seed: int = 0) -> Oracle:
    """A synthetic judge: ``oracle(i, j)`` is True (i preferred) with BT probability.

    >>> judge = bt_oracle([0.9, 0.1], seed=0)
    >>> sum(judge(0, 1) for _ in range(1000)) > 850
    True
    """
    b = np.asarray(strengths, np.float64)
    rng = np.random.default_rng(seed)
    return lambda i, j: bool(rng.random() < b[i] / (b[i] + b[j]))


@dataclass(frozen=True)
class AdaptiveResult:
    """wins (n, n) collected; comparisons (n, n) per pair; judge_calls (invalid ones
    included); history: one row per round and pair with comparisons added."""

    wins: NDArray[np.int64]
    comparisons: NDArray[np.int64]
    judge_calls: int
    history: pd.DataFrame


def _ask(oracle: Oracle, i: int, j: int, m: int, wins: NDArray[np.int64]) -> int:
    """Collect m valid answers for (i, j) into ``wins``; return the calls made."""
    calls, invalid = 0, 0
    while m > 0:
        answer = oracle(i, j)
        calls += 1
        if answer is None:
            invalid += 1
            if invalid >= MAX_INVALID_IN_A_ROW:
                raise RuntimeError(f"oracle gave {invalid} invalid answers in a row for ({i}, {j})")
            continue
        invalid, m = 0, m - 1
        wins[(i, j) if answer else (j, i)] += 1
    return calls


def score_covariance(strengths: ArrayLike, comparisons: ArrayLike) -> NDArray[np.float64]:
    """Approximate covariance (n, n) of 0-100 BT scores from the Fisher information.

    >>> cov = score_covariance([0.5, 0.5], [[0, 100], [100, 0]])
    >>> round(float(np.sqrt(cov[0, 0])), 2)  # = 100 * sqrt(0.25 / 100), a proportion's sd
    5.0
    """
    b = np.asarray(strengths, np.float64)
    info = np.asarray(comparisons, np.float64) * np.outer(b, b) / (b[:, None] + b[None, :]) ** 2
    laplacian = np.diag(info.sum(axis=1)) - info
    jac = 100.0 * (np.diag(b) - np.outer(b, b))
    return jac @ np.linalg.pinv(laplacian) @ jac.T


def _focus(scores: NDArray[np.float64], cov: NDArray[np.float64], z: float) -> NDArray[np.float64]:
    """Weights M with objective trace(M cov): identity plus adjacent unsettled pairs."""
    weights = np.eye(len(scores))
    order = np.argsort(-scores)
    for a, c in zip(order[:-1], order[1:]):
        var = cov[a, a] + cov[c, c] - 2 * cov[a, c]
        if abs(scores[a] - scores[c]) < z * np.sqrt(max(var, 0.0)):
            u = np.zeros(len(scores))
            u[[a, c]] = 1.0, -1.0
            weights += np.outer(u, u)
    return weights


def plan_batch(strengths: ArrayLike, comparisons: ArrayLike, size: int, step: int = 10,
               z: float = 1.96) -> NDArray[np.int64]:
    """Counts (n, n), upper triangle, of the next ``size`` comparisons (greedy, see module).

    >>> plan = plan_batch([0.45, 0.45, 0.1], np.full((3, 3), 10) - 10 * np.eye(3), 20)
    >>> int(plan.sum()), int(plan[0, 1])  # the tied pair gets the calls
    (20, 20)
    """
    b = np.asarray(strengths, np.float64)
    n = len(b)
    counts = np.asarray(comparisons, np.float64).copy()
    first, second = np.triu_indices(n, 1)
    w = b[first] * b[second] / (b[first] + b[second]) ** 2
    diff = np.zeros((n, len(first)))
    diff[first, np.arange(len(first))], diff[second, np.arange(len(first))] = 1.0, -1.0
    info = counts * np.outer(b, b) / (b[:, None] + b[None, :]) ** 2
    theta_cov = np.linalg.pinv(np.diag(info.sum(axis=1)) - info)
    jac = 100.0 * (np.diag(b) - np.outer(b, b))
    weights = _focus(100.0 * b, jac @ theta_cov @ jac.T, z)
    plan = np.zeros((n, n), np.int64)
    for m in _steps(size, step):
        cu = theta_cov @ diff
        v = jac @ cu
        gain = m * w * np.sum(v * (weights @ v), axis=0) / (1 + m * w * np.sum(diff * cu, axis=0))
        k = int(np.argmax(gain))
        plan[first[k], second[k]] += m
        theta_cov -= m * w[k] * np.outer(cu[:, k], cu[:, k]) / (1 + m * w[k] * diff[:, k] @ cu[:, k])
    return plan


def _steps(size: int, step: int) -> list[int]:
    return [step] * (size // step) + ([size % step] if size % step else [])


def adaptive_comparisons(oracle: Oracle, n_policies: int, budget: int, init_per_pair: int = 10,
                         batch: int = 100, step: int = 10, z: float = 1.96) -> AdaptiveResult:
    """Spend ``budget`` valid comparisons adaptively; ``oracle(i, j)`` True if i wins.

    ``init_per_pair`` uniform comparisons per pair first (so the graph is connected),
    then rounds of ``batch``. Planning strengths are fitted with half a pseudo-win per
    ordered pair so that no policy sits at 0. The allocation itself is deterministic;
    all randomness is the oracle's (seed it there, as :func:`bt_oracle` does).
    """
    pairs = n_policies * (n_policies - 1) // 2
    if init_per_pair < 1 or budget < init_per_pair * pairs:
        raise ValueError(f"need init_per_pair >= 1 and budget >= init_per_pair * {pairs} pairs")
    wins, rows = np.zeros((n_policies, n_policies), np.int64), []
    plan = np.triu(np.full((n_policies, n_policies), init_per_pair), 1)
    calls, spent, round_no = 0, 0, 0
    while True:
        for i, j in zip(*np.nonzero(plan)):
            calls += _ask(oracle, int(i), int(j), int(plan[i, j]), wins)
            rows.append((round_no, int(i), int(j), int(plan[i, j]), calls))
        spent += int(plan.sum())
        if spent >= budget:
            break
        round_no += 1
        plan = plan_batch(_planning_strengths(wins), wins + wins.T, min(batch, budget - spent), step, z)
    history = pd.DataFrame(rows, columns=["round", "i", "j", "added", "judge_calls"])
    return AdaptiveResult(wins=wins, comparisons=wins + wins.T, judge_calls=calls, history=history)


def _planning_strengths(wins: NDArray[np.int64]) -> NDArray[np.float64]:
    smoothed = wins + 0.5 * (1 - np.eye(len(wins)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_bradley_terry(smoothed).strengths


def uniform_comparisons(oracle: Oracle, n_policies: int, per_pair: int) -> AdaptiveResult:
    """The baseline: ``per_pair`` comparisons of every pair, same result type.

    >>> uniform_comparisons(bt_oracle([0.5, 0.5]), 2, 7).judge_calls
    7
    """
    wins = np.zeros((n_policies, n_policies), np.int64)
    first, second = np.triu_indices(n_policies, 1)
    calls = sum(_ask(oracle, int(i), int(j), per_pair, wins) for i, j in zip(first, second))
    history = pd.DataFrame({"round": 0, "i": first, "j": second, "added": per_pair,
                            "judge_calls": calls})
    return AdaptiveResult(wins=wins, comparisons=wins + wins.T, judge_calls=calls, history=history)
