"""How much a better stopping boundary could save the success test: the Bayes-optimal
boundary over the discordant walk, exactly valid, against the mixture test on the design
grid.

The success test of :mod:`workbench.ranking.sequential` decides when the Beta(1/4)
mixture e-value of the discordant pairs reaches its budget-calibrated threshold. Any test
that looks only at (n discordant pairs, k of them won by A) and is symmetric in A and B
decides where ``|2k - n| >= b[n]`` for some table ``b``; its type-I error under the fair
walk is computed exactly for any ``b`` (:func:`boundary_type_one`). Among such tables,
:func:`bayes_boundary` finds the one with the least expected cost under a prior over
effects, by backward induction over (n, k), with a Lagrange multiplier on the null's
chance of deciding bisected until that chance is at most ``alpha``: the best a boundary
can do for that prior, nothing left to tune by hand.

The prior (it affects power only, never validity): A's share of the discordant pairs
uniform on :data:`SHARES` and their mirrors; the discordance rate per episode uniform on
:data:`RATES` (log-spaced, 0.025 to 1, so that the boundary still spends alpha late, where
high discordance with a small effect decides). The cost of a rule that stops at its n-th
discordant pair: the episodes it uses over the budget, plus :data:`UNDECIDED` if the
budget ends first, plus :data:`WRONG` for a decision the wrong way. Episodes enter
through the arrival of the n-th discordant pair (negative binomial in the rate).

:func:`boundary_study` puts both tests through the design grid
(:func:`workbench.studies.sequential_validation.grid_effects`), the same exact
computation that chose the mixture's prior. ``python -m
workbench.studies.sequential_design [--out DIR]`` prints it (design time about a second).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from workbench.ranking.sequential import budget_threshold, stopping_distribution, walk_stopping
from workbench.studies.sequential_validation import fewest_deciding, grid_effects

SHARES = tuple(round(0.55 + 0.05 * i, 2) for i in range(10))  # 0.55 .. 1.0, and mirrors
RATES = tuple(float(v) for v in np.geomspace(0.025, 1.0, 12))
UNDECIDED = 1.0  # cost of a budget that ends undecided (in budgets of episodes)
WRONG = 10.0  # cost of a decision the wrong way


def boundary_stopping(bound: np.ndarray, share: float = 0.5) -> np.ndarray:
    """P(the boundary test first decides at the n-th discordant pair), n = 0 ..
    ``len(bound) - 1``: it decides where ``|2 wins - n| >= bound[n]`` (never on a tie)."""
    return walk_stopping(lambda n, wins: np.abs(2 * wins - n) >= max(int(bound[n]), 1),
                         len(bound) - 1, share)


def boundary_type_one(bound: np.ndarray) -> float:
    """The boundary's exact chance of ever deciding under the null (a fair coin per
    discordant pair) within ``len(bound) - 1`` pairs."""
    return float(boundary_stopping(bound, 0.5).sum())


@functools.lru_cache(maxsize=16)
def bayes_boundary(horizon: int, alpha: float = 0.05) -> np.ndarray:
    """The Bayes-optimal table ``b[n]``, n = 0 .. ``horizon`` (see the module docstring):
    decide for the side ahead where ``|2k - n| >= b[n]``; exactly valid at ``alpha``
    within ``horizon`` discordant pairs. ``fewest_deciding(alpha)`` pairs all one way
    always decide (no symmetric test can decide on fewer).

    >>> b = bayes_boundary(60)
    >>> int(b[6]), boundary_type_one(b) <= 0.05
    (6, True)
    """
    costs = _bayes_costs(horizon)
    low, high = -10.0, 60.0  # log of the Lagrange multiplier
    best = _bayes_table(costs, high, fewest_deciding(alpha))
    while high - low > 1e-4:
        middle = (low + high) / 2
        table = _bayes_table(costs, middle, fewest_deciding(alpha))
        if boundary_type_one(table) <= alpha:
            high, best = middle, table
        else:
            low = middle
    best = _closed(best)
    best.setflags(write=False)  # cached: shared between callers
    return best


def _bayes_costs(horizon: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Log expected costs relative to the fair walk: of stopping for the side ahead at
    each (n, k > n / 2), and of ending undecided at ``horizon`` (per k)."""
    from scipy import stats
    from scipy.special import logsumexp

    n_all, q = np.arange(horizon + 1), np.array(SHARES)
    episodes = np.mean([stats.binom.cdf(n_all[None, :] - 1, np.arange(horizon)[:, None],
                                        rate).sum(0) for rate in RATES], 0) / horizon
    decided = np.mean([stats.binom.sf(n_all - 1, horizon, rate) for rate in RATES], 0)
    right = episodes + UNDECIDED * (1 - decided)
    wrong = right + WRONG * decided
    log_q, log_p = np.log(2 * q), np.log(np.maximum(2 * (1 - q), 1e-300))

    def log_ratio(wins: np.ndarray, losses: np.ndarray) -> np.ndarray:  # over SHARES
        return logsumexp(wins[None, :] * log_q[:, None]
                         + np.where(losses > 0, losses[None, :] * log_p[:, None], 0.0), 0)

    per_side = -math.log(2 * len(q))
    stop = []
    for n in n_all:
        k = np.arange(n // 2 + 1, n + 1)
        stop.append(np.logaddexp(log_ratio(k, n - k) + math.log(max(right[n], 1e-300)),
                                 log_ratio(n - k, k) + math.log(max(wrong[n], 1e-300))) + per_side)
    k = n_all
    end = np.logaddexp(log_ratio(k, horizon - k), log_ratio(horizon - k, k)) + per_side \
        + math.log(1 + UNDECIDED)
    return stop, end


def _bayes_table(costs: tuple[list[np.ndarray], np.ndarray], log_lambda: float,
                 floor: int) -> np.ndarray:
    """Backward induction for one multiplier: the least lead at each n where stopping
    costs less than going on (n + 2 where it never does)."""
    stop_costs, end = costs
    horizon = len(stop_costs) - 1
    table = np.empty(horizon + 1, np.int64)
    value = end
    for n in range(horizon, -1, -1):
        lead = np.abs(2 * np.arange(n + 1) - n)
        half = np.logaddexp(stop_costs[n], log_lambda)  # k > n / 2; mirrored below
        stop = np.full(n + 1, np.inf)
        stop[n // 2 + 1:], stop[:(n + 1) // 2] = half, half[::-1]
        go_on = end if n == horizon else np.logaddexp(value[1:], value[:-1]) - math.log(2)
        cheaper = stop < go_on
        table[n] = lead[cheaper].min() if cheaper.any() else n + 2
        if n == floor:
            table[n] = min(table[n], floor)
        table[n] = max(table[n], 1)
        value = np.where(lead >= table[n], stop, go_on)
    return table


def _closed(table: np.ndarray) -> np.ndarray:
    """The same decisions on every reachable state, and a decision on every lead above a
    decided one (a round that adds several pairs at once may jump over the boundary):
    where the walk cannot reach, the table is lowered to the first unreachable lead."""
    table, reach = table.copy(), 0  # the largest lead not yet decided at n - 1
    for n in range(1, len(table)):
        top = reach + 1
        table[n] = min(table[n], top + 2)
        reach = top if top < table[n] else table[n] - 1 - (table[n] - 1 - n) % 2
    return table


def boundary_study(horizon: int = 400, alpha: float = 0.05, orders: int = 50
                   ) -> pd.DataFrame:
    """The design grid for the mixture test (``test`` "beta-0.25", at its budget
    threshold) and the Bayes-optimal boundary (``test`` "bayes"), exactly; columns as in
    :func:`~workbench.studies.sequential_validation.grid_effects`, plus ``type_one``."""
    log_c = math.log(budget_threshold(horizon, alpha))
    bound = bayes_boundary(horizon, alpha)
    tests = {"beta-0.25": (lambda share: stopping_distribution(log_c, horizon, share),
                           float(stopping_distribution(log_c, horizon).sum())),
             "bayes": (lambda share: boundary_stopping(bound, share),
                       boundary_type_one(bound))}
    return pd.concat([grid_effects(stop, horizon, alpha, orders).assign(test=name,
                                                                         type_one=type_one)
                      for name, (stop, type_one) in tests.items()], ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--horizon", type=int, default=400)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    table = boundary_study(args.horizon, args.alpha)
    print(table.to_string(index=False, float_format="{:.3f}".format))
    summary = {name: {"median_ratio_to_matched": float(frame["ratio_to_matched"].median()),
                      "mean_decided": float(frame["decided"].mean()),
                      "type_one": float(frame["type_one"].iloc[0])}
               for name, frame in table.groupby("test")}
    print(json.dumps(summary))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        table.to_csv(Path(args.out) / "boundary_study.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
