"""Validation metrics of R2S-Eval ("Evaluation metrics", Sec. IV-B) and their helpers.

Spearman rho and Pearson r against a reference, MMRV (SimplerEnv's definition), mean
bootstrap interval width, agreement with humans, order-swap consistency, win-rate
matrices and success rates with Wilson intervals (shared with the run reports).

>>> spearman_rho([0.1, 0.5, 0.9], [1, 2, 3])
1.0
>>> mmrv([0.1, 0.5, 0.9], [1, 2, 3])
0.0
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats


def wilson_interval(successes: ArrayLike, trials: ArrayLike,
                    level: float = 0.95) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson score interval (lower, upper) for success proportions.

    >>> lo, hi = wilson_interval(8, 10)
    >>> round(float(lo), 3), round(float(hi), 3)
    (0.49, 0.943)
    """
    k, n = np.asarray(successes, np.float64), np.asarray(trials, np.float64)
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= successes <= trials and trials > 0")
    z = stats.norm.ppf(0.5 + level / 2)
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return centre - half, centre + half


def _paired(a: ArrayLike, b: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"need two 1-D sequences of equal length; got {x.shape} and {y.shape}")
    if len(x) < 2:
        raise ValueError("need at least 2 policies")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("values must be finite")
    return x, y


def spearman_rho(reference: ArrayLike, evaluated: ArrayLike) -> float:
    """Spearman rank correlation (ties get average ranks); NaN when either side is
    constant (there is no ranking to correlate).

    >>> round(spearman_rho([1, 2, 3, 4], [10, 30, 20, 40]), 4), spearman_rho([1, 2], [5, 5])
    (0.8, nan)
    """
    x, y = _paired(reference, evaluated)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def pearson_r(reference: ArrayLike, evaluated: ArrayLike) -> float:
    """Pearson correlation of the values; NaN when either side is constant.

    >>> round(pearson_r([1, 2, 3], [2, 4, 7]), 4), pearson_r([1, 2, 3], [0, 0, 0])
    (0.9934, nan)
    """
    x, y = _paired(reference, evaluated)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.pearsonr(x, y).statistic)


def mmrv(real: ArrayLike, evaluated: ArrayLike) -> float:
    """Mean Maximum Rank Violation, exactly as SimplerEnv's ``mean_maximum_rank_violation``.

    For each policy i: the largest ``|real_i - real_j|`` over the j with
    ``(evaluated_i > evaluated_j) != (real_i > real_j)``, 0 if none; then the mean over
    i. Comparisons are strict, so a tie on one side against an order on the other is a
    violation, counted for the policy that is ahead in ``real``. (Writing the test with
    ``<`` instead of ``>`` charges such a tie to the other policy and can change the
    mean; this follows SimplerEnv's ``>``.) ``real`` should be on the 0-1 scale
    (success rates) for values comparable with the papers.

    >>> round(mmrv(real=[0.2, 0.5, 0.6], evaluated=[1, 3, 2]), 4)  # 0.1 for policies 1, 2
    0.0667
    >>> round(mmrv(real=[0.0, 0.1, 0.5], evaluated=[7, 7, 7]), 4)  # all tied: 0, 0.1, 0.5
    0.2
    """
    x, y = _paired(real, evaluated)
    violated = (y[:, None] > y[None, :]) != (x[:, None] > x[None, :])
    gaps = np.where(violated, np.abs(x[:, None] - x[None, :]), 0.0)
    return float(gaps.max(axis=1).mean())


def mean_interval_width(lower: ArrayLike, upper: ArrayLike) -> float:
    """Mean of ``upper - lower`` (BT CI on the 0-100 score scale in the paper).

    >>> mean_interval_width([1, 2], [2, 5])
    2.0
    """
    lo, hi = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    if lo.shape != hi.shape or np.any(hi < lo):
        raise ValueError("lower and upper must have one shape with upper >= lower")
    return float(np.mean(hi - lo))


def _choices(values: ArrayLike, name: str) -> NDArray[np.object_]:
    arr = np.array([None if pd.isna(v) else v for v in values], dtype=object)
    bad = [v for v in arr if v not in ("A", "B", None)]
    if bad:
        raise ValueError(f"{name} must hold 'A', 'B' or None (invalid); got {bad[0]!r}")
    return arr


def agreement_rate(judge: ArrayLike, human: ArrayLike) -> float:
    """Share of pairs where the judge picks the same video as humans ('A'/'B').

    Pairs where either side is None or NaN (invalid, or a tied vote) are left out.

    >>> agreement_rate(["A", "B", "A", None], ["A", "A", "A", "B"])
    0.6666666666666666
    """
    j, h = _choices(judge, "judge"), _choices(human, "human")
    if j.shape != h.shape:
        raise ValueError(f"judge and human differ in length: {j.shape} vs {h.shape}")
    both = np.array([a is not None and b is not None for a, b in zip(j, h)], bool)
    if not both.any():
        raise ValueError("no pair has a valid choice on both sides")
    return float(np.mean(j[both] == h[both]))


def order_swap_consistency(original: ArrayLike, swapped: ArrayLike) -> float:
    """Share of pairs whose preferred video survives swapping positions A and B.

    ``original[k]`` judges (x as A, y as B), ``swapped[k]`` the same pair as (y, x);
    consistent means 'A' then 'B' or 'B' then 'A'. Invalid (None) pairs are left out.

    >>> order_swap_consistency(["A", "A", "B"], ["B", "A", "A"])
    0.6666666666666666
    """
    o, s = _choices(original, "original"), _choices(swapped, "swapped")
    flipped = np.array([{"A": "B", "B": "A", None: None}[v] for v in s], dtype=object)
    return agreement_rate(o, flipped)


def win_rate_matrix(wins: ArrayLike) -> NDArray[np.float64]:
    """Win rates (n, n): ``wins[i, j] / (wins[i, j] + wins[j, i])``, NaN where never compared.

    >>> win_rate_matrix([[0, 3], [1, 0]]).tolist()
    [[nan, 0.75], [0.25, nan]]
    """
    w = np.asarray(wins, np.float64)
    totals = w + w.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(totals > 0, w / totals, np.nan)
    np.fill_diagonal(rates, np.nan)
    return rates


def success_rates(rollouts: pd.DataFrame, by: str | Sequence[str] = "policy",
                  column: str = "success", level: float = 0.95) -> pd.DataFrame:
    """Success rate per group with Wilson intervals: columns n, successes, rate, lower, upper.

    >>> df = pd.DataFrame({"policy": ["a", "a", "b"], "success": [True, False, True]})
    >>> success_rates(df)[["policy", "n", "rate"]].values.tolist()
    [['a', 2, 0.5], ['b', 1, 1.0]]
    """
    grouped = rollouts.groupby(by, sort=True)[column]
    table = grouped.agg(n="size", successes="sum").reset_index()
    table["successes"] = table["successes"].astype(int)
    table["rate"] = table["successes"] / table["n"]
    table["lower"], table["upper"] = wilson_interval(table["successes"], table["n"], level)
    return table
