"""Speed of the vectorised BT bootstrap against a Python loop of choix fits.

Workload: synthetic wins for n policies (strengths from a seeded Dirichlet), 2,000
comparisons per pair, 1,000 bootstrap replicates (binomial within each pair, counts kept).
``ours`` is ``bootstrap_bradley_terry`` end to end (resampling, batched MM, percentiles),
median of several runs. ``loop`` fits the same replicate matrices one at a time with
``choix.ilsr_pairwise_dense`` (exp, normalise); its resampling is done beforehand and not
timed, which favours the loop. For 50 and 200 policies the loop runs on the first
replicates only and is scaled to 1,000. ``max_diff`` compares the replicate scores of the
two (0-100 scale) on the replicates both fitted.

    python perf/ranking.py [--sizes 6 50 200] [--repeats 7]

Prints a table and, last, one JSON line. Target (6 policies): median under 25 ms and at
least 40x faster than the loop.
"""

from __future__ import annotations

import argparse
import json
import time

import choix
import numpy as np

from workbench.ranking.bootstrap import bootstrap_bradley_terry, resample_wins

PER_PAIR, N_BOOT = 2000, 1000
TARGET_MS, TARGET_SPEEDUP = 25.0, 40.0
LOOP_REPLICATES = {6: 1000, 50: 100, 200: 10}


def synthetic_wins(n: int, seed: int = 0) -> np.ndarray:
    """Wins (n, n) from PER_PAIR comparisons per pair under BT with Dirichlet strengths."""
    rng = np.random.default_rng(seed)
    b = rng.dirichlet(np.full(n, 2.0))
    first, second = np.triu_indices(n, 1)
    k = rng.binomial(PER_PAIR, b[first] / (b[first] + b[second]))
    wins = np.zeros((n, n), np.int64)
    wins[first, second], wins[second, first] = k, PER_PAIR - k
    return wins


def time_ours(wins: np.ndarray, repeats: int) -> tuple[float, np.ndarray]:
    """Median seconds of the full vectorised bootstrap, and its replicate scores."""
    result = bootstrap_bradley_terry(wins, n_boot=N_BOOT, seed=0)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = bootstrap_bradley_terry(wins, n_boot=N_BOOT, seed=0)
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result.replicates


def time_loop(wins: np.ndarray, replicates: int) -> tuple[float, np.ndarray]:
    """Seconds to fit ``replicates`` resampled matrices one by one with choix."""
    mats = resample_wins(wins, n_boot=replicates, seed=0)  # same draws as ours' first rows
    start = time.perf_counter()
    scores = []
    for mat in mats:
        theta = choix.ilsr_pairwise_dense(mat)
        b = np.exp(theta - theta.max())
        scores.append(100 * b / b.sum())
    return time.perf_counter() - start, np.array(scores)


def measure(n: int, repeats: int) -> dict[str, float | int]:
    """One row of the table for n policies."""
    wins = synthetic_wins(n)
    ours_s, ours_reps = time_ours(wins, repeats if n <= 50 else 1)
    k = LOOP_REPLICATES.get(n, 10)
    loop_s, loop_reps = time_loop(wins, k)
    loop_full = loop_s * N_BOOT / k
    return {"n_policies": n, "per_pair": PER_PAIR, "n_boot": N_BOOT,
            "ours_ms": 1000 * ours_s, "loop_ms": 1000 * loop_full, "loop_replicates_timed": k,
            "speedup": loop_full / ours_s,
            "max_diff": float(np.abs(ours_reps[:k] - loop_reps).max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[6, 50, 200])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs (median)")
    args = parser.parse_args()
    rows = [measure(n, args.repeats) for n in args.sizes]
    print(f"{'policies':>8} {'ours ms':>10} {'loop ms':>11} {'timed':>6} {'speedup':>8} {'max diff':>9}")
    for r in rows:
        print(f"{r['n_policies']:>8} {r['ours_ms']:>10.1f} {r['loop_ms']:>11.1f} "
              f"{r['loop_replicates_timed']:>6} {r['speedup']:>7.1f}x {r['max_diff']:>9.1e}")
    summary: dict[str, object] = {f"n{r['n_policies']}": r for r in rows}
    six = next((r for r in rows if r["n_policies"] == 6), None)
    if six is not None:
        summary["target"] = {"ms": TARGET_MS, "speedup": TARGET_SPEEDUP,
                             "met": bool(six["ours_ms"] < TARGET_MS
                                         and six["speedup"] >= TARGET_SPEEDUP)}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
