"""The sequential paired test replayed on episodes nobody tuned it on.

Notebook 14 (judge validation, full size) runs 8 trained candidates on the same 900
episodes each (6 MT10 tasks; task set 0's initial states 0-49 and task sets 2 and 3 in
full). Those records are the data here: the test of :mod:`workbench.ranking.sequential`
was written before they were read, and nothing of it is adjusted to them.

For every pair of candidates, the **reference** is the direction of their success rates
over all their shared episodes. The sequential test then sees the pair's paired episodes
one at a time in a random order (``orders`` seeded permutations, each a replay of a
comparison), and stops at its first decision or at the end. Reported per pair: how often
it decided, how often a decision went the reference's way, the median episodes it used,
and the episodes a fixed-size exact McNemar test at the same alpha needs given the pair's
discordance rates over the reference: for 80% power, and for the power the sequential
test showed on the pair (:func:`matched_power`: like with like). Beside them, two
references on the same orders: Wald's SPRT told the true effect in advance (one-sided, so
not a bound for a two-sided test), and the **floor**: the episodes until the pair's
``m``-th discordant episode, ``m`` the fewest discordant pairs on which any test symmetric
in A and B can decide at alpha (6 at 5%: five all one way happen by chance with
probability 2 / 32). No such test can stop sooner, so the floor is a bound. Pairs whose
reference difference
is itself not significant (Wilson intervals overlapping) are kept and marked: deciding
them either way, or not at all, is what a finite budget does.

**Fresh candidates** (:func:`run_fresh_candidates`): the scripted expert's graded ladder
(:data:`~workbench.policies.scripted.GRADED_LADDER`: each rung adds one defect) and the
expert under Gaussian action noise of 0.5 and 1.0, so the order is known in advance and no
candidate was chosen after seeing its numbers, on four MT10 tasks notebook 14 never ran, on
task sets 4 and 5. Nothing of the test is adjusted to them either.

**The design grid** (:func:`design_grid`): how the success test's mixture was chosen,
before any of the data above was replayed with it. On a synthetic grid of effects fixed in
advance (discordance rates 0.05, 0.1, 0.2 and 0.4 times A's share of the discordant pairs
0.65, 0.75, 0.85, 0.95 and 1; a budget of 400 paired episodes), each candidate prior's
median episodes and decision rate are computed exactly (dynamic programming over the
discordant walk, at its budget-calibrated threshold) and divided by the fixed-size test's
at matched power, as in the replay.

``python -m workbench.studies.sequential_validation RUNS_DIR [--alpha 0.05] [--orders 50]
[--metric success|progress] [--run-fresh]`` reads every ``records.sqlite`` below RUNS_DIR
(notebook 14's ``output_dir``, or the fresh candidates' after ``--run-fresh`` ran them
there; ``--seeds`` picks their task sets, 4 and 5 by default) and prints the table and
summary; ``--out DIR`` writes them as CSV and JSON. ``--design-grid`` prints the design
grid instead.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from workbench.ranking.metrics import wilson_interval
from workbench.ranking.sequential import first_decision, fixed_size_episodes
from workbench.records import load_results

FRESH_TASKS = ("pick-place-v3", "drawer-open-v3", "peg-insert-side-v3", "window-close-v3")
FRESH_SEEDS = (4, 5)


FRESH_NOISE = (0.5, 1.0)


def run_fresh_candidates(output_dir: str | Path, episodes: int = 50,
                         tasks: Sequence[str] = FRESH_TASKS,
                         seeds: Sequence[int] = FRESH_SEEDS, workers: int = 2) -> Path:
    """Run every rung of the scripted expert's graded ladder and the expert under each of
    :data:`FRESH_NOISE`'s action noise on initial states ``0 .. episodes-1`` of ``tasks``
    of each task set of ``seeds``, through the one runner (pool backend), into
    ``<output_dir>/seed<s>/<candidate>/records.sqlite`` (a rerun resumes: no episode runs
    twice). Returns the folder to replay."""
    from workbench.policies.scripted import GRADED_LADDER

    candidates = {f"rung{rung}": defects for rung, defects in enumerate(GRADED_LADDER)}
    candidates.update({f"noise{level:g}": (("noise", level),) for level in FRESH_NOISE})
    for seed in seeds:
        for name, defects in candidates.items():
            _run_candidate(Path(output_dir) / f"seed{seed}" / name, defects, tasks,
                           episodes, seed, workers)
    return Path(output_dir)


def _run_candidate(output_dir: Path, defects: Sequence[Sequence[Any]], tasks: Sequence[str],
                   episodes: int, seed: int, workers: int) -> None:
    from workbench.config import EvalConfig
    from workbench.runner import run

    config = EvalConfig(benchmark="metaworld", suite="MT10", tasks=list(tasks),
                        policy="expert", policy_options={"defects": [list(d) for d in defects]},
                        episodes=episodes, seed=seed, backend="pool",
                        pool={"workers": workers, "replicas": 1}, output_dir=str(output_dir),
                        interactions=False, progress=False)
    result = run(config)
    errors = result.results["error_kind"].eq("infrastructure")
    if errors.any():
        raise RuntimeError(f"{output_dir}: {int(errors.sum())} episodes ended in "
                           "infrastructure errors (recorded there); retry them first")


def candidate_outcomes(runs_dir: str | Path) -> pd.DataFrame:
    """One row per (candidate, episode identity): policy, episode (task set, task,
    initial state), success and progress; from every records file below ``runs_dir``
    (episodes a harness error interrupted are left out)."""
    frames = []
    for path in sorted(Path(runs_dir).rglob("records.sqlite")):
        rows = load_results(path)
        rows = rows[(rows["status"] == "finished") & (rows["error_kind"] != "infrastructure")]
        if rows.empty:
            continue
        task_set = path.parent.parent.name  # rollouts/<candidate>, reference-seed<s>/<candidate>
        success = rows["success"].astype(bool).astype(float)
        progress = pd.to_numeric(rows["progress"], errors="coerce") if "progress" in rows \
            else pd.Series(float("nan"), index=rows.index)
        frames.append(pd.DataFrame({
            "policy": rows["policy"].astype(str),
            "episode": task_set + "/" + rows["task"].astype(str) + "/"
            + rows["init_state_id"].astype(str),
            "success": success,
            "progress": progress.where(progress.isna() | (success < 1), 1.0)}))
    if not frames:
        raise ValueError(f"{runs_dir}: expected records of candidates; got none")
    table = pd.concat(frames, ignore_index=True)
    return table.drop_duplicates(["policy", "episode"], keep="first")


def matched_power(decided: int, orders: int) -> float:
    """The power a fixed-size test is held to so that it matches the sequential test's:
    the lower end of the 95% Wilson interval of the sequential test's decision rate over
    its ``orders`` replays (conservative: it asks the fixed-size test for less power than
    the sequential test showed), at most 0.99."""
    low, _ = wilson_interval([decided], [orders])
    return float(min(0.99, low[0]))


def fixed_size_progress(differences: np.ndarray, alpha: float, power: float) -> int | None:
    """Paired episodes a fixed-size two-sided z-test of the mean paired progress
    difference at ``alpha`` needs for ``power``, given the differences' mean and spread
    over the reference; None when the mean is 0."""
    from scipy import stats

    mean, spread = float(np.mean(differences)), float(np.std(differences, ddof=1))
    if mean == 0 or spread == 0:
        return None if mean == 0 else 1
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    if z <= 0:  # a power below alpha / 2: any size has it
        return 1
    return int(np.ceil((z * spread / abs(mean)) ** 2))


def replay_pairs(outcomes: pd.DataFrame, alpha: float = 0.05, orders: int = 50,
                 power: float = 0.8, seed: int = 0, metric: str = "success",
                 budget_calibrated: bool = False) -> pd.DataFrame:
    """The replay of the sequential test per pair of candidates (see the module
    docstring); ``alpha`` per pair. The fixed-size test is sized twice: for ``power``
    (``fixed_size``) and for the power the sequential test showed (``fixed_matched``,
    :func:`matched_power`); ``ratio_*`` divide the sequential test's median episodes
    by each. ``budget_calibrated``: the success test's threshold is the exact one for the
    pair's episodes as the budget (:func:`~workbench.ranking.sequential.budget_threshold`)
    instead of ``1 / alpha``."""
    wide = outcomes.pivot(index="episode", columns="policy", values=metric)
    rng = np.random.default_rng(seed)
    rows = []
    for a, b in combinations(sorted(wide.columns), 2):
        both = wide[[a, b]].dropna()
        x, y = both[a].to_numpy(), both[b].to_numpy()
        n = len(x)
        if n == 0:
            continue
        if metric == "success":
            lo, hi = wilson_interval([x.sum(), y.sum()], [n, n])
            separated = bool(lo[0] > hi[1] or lo[1] > hi[0])
        else:  # the paired differences' 95% normal interval excludes 0
            d = x - y
            half = 1.96 * float(np.std(d, ddof=1)) / np.sqrt(n) if n > 1 else np.inf
            separated = bool(abs(float(d.mean())) > half)
        reference = "a" if x.mean() > y.mean() else "b" if y.mean() > x.mean() else None
        a_only, b_only = float(np.mean((x > 0.5) & (y <= 0.5))), float(np.mean((y > 0.5) &
                                                                               (x <= 0.5)))
        used, oracle, floor, correct, decided = [], [], [], 0, 0
        for _ in range(orders):
            order = rng.permutation(n)
            state = first_decision(x[order], y[order], alpha, metric,
                                   horizon=n if budget_calibrated else None)
            used.append(state.episodes)
            if metric == "success":
                oracle.append(_oracle_episodes(x[order], y[order], a_only, b_only, alpha))
                floor.append(_floor_episodes(x[order], y[order], alpha))
            if state.decided:
                decided += 1
                correct += state.winner == reference
        matched = matched_power(decided, orders) if decided else None

        def size(target: float | None) -> int | None:
            if target is None:
                return None
            if metric == "success":
                return fixed_size_episodes(a_only, b_only, alpha, target)
            return fixed_size_progress(x - y, alpha, target)

        fixed, fixed_matched = size(power), size(matched)
        median = float(np.median(used))
        rows.append({"a": a, "b": b, "episodes": n, f"{metric}_a": float(x.mean()),
                     f"{metric}_b": float(y.mean()), "reference": reference,
                     "reference_separated": separated,
                     "decided_share": decided / orders,
                     "correct_of_decided": correct / decided if decided else np.nan,
                     "median_episodes": median, "fixed_size": fixed,
                     "ratio_to_fixed": median / fixed if fixed else np.nan,
                     "matched_power": matched, "fixed_matched": fixed_matched,
                     "ratio_to_matched": median / fixed_matched if fixed_matched else np.nan,
                     "oracle_median_episodes": float(np.median(oracle)) if oracle else np.nan,
                     "oracle_ratio_to_matched": float(np.median(oracle)) / fixed_matched
                     if oracle and fixed_matched else np.nan,
                     "floor_median_episodes": float(np.median(floor)) if floor else np.nan,
                     "floor_ratio_to_matched": float(np.median(floor)) / fixed_matched
                     if floor and fixed_matched else np.nan})
    return pd.DataFrame(rows)


def fewest_deciding(alpha: float) -> int:
    """The fewest discordant pairs on which a test symmetric in A and B can decide at
    ``alpha``: ``m`` all one way, either way, happen by chance with probability
    ``2 ** (1 - m)``, which must be at most ``alpha``.

    >>> fewest_deciding(0.05), fewest_deciding(0.05 / 28)
    (6, 11)
    """
    return max(1, math.ceil(math.log2(2 / alpha) - 1e-12))


def _floor_episodes(x: np.ndarray, y: np.ndarray, alpha: float) -> int:
    """Episodes until the :func:`fewest_deciding`-th discordant one (the whole sequence
    when it has fewer): no symmetric test at ``alpha`` can stop sooner."""
    discordant = np.flatnonzero((x > 0.5) != (y > 0.5))
    m = fewest_deciding(alpha)
    return int(discordant[m - 1]) + 1 if discordant.size >= m else len(x)


def _oracle_episodes(x: np.ndarray, y: np.ndarray, a_only: float, b_only: float,
                     alpha: float) -> int:
    """Episodes until Wald's sequential probability ratio test, told the pair's true
    discordant share in advance (from the reference), passes ``1 / alpha`` (all of them
    when it does not): the ceiling no test that must learn the effect can beat, measured
    on the same orders."""
    if a_only + b_only == 0 or a_only == b_only:
        return len(x)
    share = a_only / (a_only + b_only)
    with np.errstate(divide="ignore"):  # a share of 0 or 1: that side's log is -inf
        win, loss = np.log(2 * share), np.log(2 * (1 - share))
    steps = np.where((x > 0.5) & (y <= 0.5), win,
                     np.where((y > 0.5) & (x <= 0.5), loss, 0.0))
    passed = np.flatnonzero(np.cumsum(steps) >= np.log(1 / alpha))
    return int(passed[0]) + 1 if passed.size else len(x)


def summarize(pairs: pd.DataFrame) -> dict[str, float | int]:
    """Over the pairs: decided share, correct direction among decisions, and the median
    over pairs of the ratio of episodes used to each fixed-size test's."""
    weights = pairs["decided_share"]
    correct = float((pairs["correct_of_decided"].fillna(0) * weights).sum() / weights.sum()) \
        if weights.sum() else float("nan")
    separated = pairs[pairs["reference_separated"]]

    def median(frame: pd.DataFrame, column: str) -> float:
        return float(frame[column].median()) if len(frame) else float("nan")

    return {"pairs": len(pairs), "separated_pairs": len(separated),
            "decided_share": float(weights.mean()),
            "correct_direction_of_decided": correct,
            "median_ratio_to_fixed": median(pairs, "ratio_to_fixed"),
            "median_ratio_to_fixed_separated": median(separated, "ratio_to_fixed"),
            "median_ratio_to_matched": median(pairs, "ratio_to_matched"),
            "median_ratio_to_matched_separated": median(separated, "ratio_to_matched"),
            "oracle_median_ratio_to_matched_separated":
                median(separated, "oracle_ratio_to_matched"),
            "floor_median_ratio_to_matched_separated":
                median(separated, "floor_ratio_to_matched")}


#: The design grid's effects, fixed before the mixture was chosen: discordance rates, and
#: A's share of the discordant pairs.
DESIGN_DISCORDANCE = (0.05, 0.1, 0.2, 0.4)
DESIGN_SHARES = (0.65, 0.75, 0.85, 0.95, 1.0)


def design_grid(priors: Sequence[float] = (0.5, 0.25, 0.1), horizon: int = 400,
                alpha: float = 0.05, orders: int = 50) -> pd.DataFrame:
    """For each Beta(prior, prior) mixture and each effect of the grid
    (:data:`DESIGN_DISCORDANCE` x :data:`DESIGN_SHARES`), exactly: the chance it decides
    within ``horizon`` paired episodes at its budget-calibrated threshold, its median
    episodes (``horizon`` when undecided), the fixed-size test's episodes at the matched
    power (:func:`matched_power` of the decision rate over ``orders``, as in the replay)
    and their ratio. One row per (prior, effect)."""
    from workbench.ranking.sequential import budget_threshold, stopping_distribution

    frames = []
    for prior in priors:
        log_c = math.log(budget_threshold(horizon, alpha, prior))
        frames.append(grid_effects(
            lambda share: stopping_distribution(log_c, horizon, share, prior),
            horizon, alpha, orders).assign(prior=prior))
    table = pd.concat(frames, ignore_index=True)
    return table[["prior"] + [c for c in table.columns if c != "prior"]]


def grid_effects(stopping: Callable[[float], np.ndarray], horizon: int = 400,
                 alpha: float = 0.05, orders: int = 50) -> pd.DataFrame:
    """One test on the design grid's effects, exactly. ``stopping(share)``: the chance
    that the test first decides at the n-th discordant pair (n = 0 .. ``horizon``) when
    each goes A's way with chance ``share``. One row per effect: discordance, share,
    decided (within ``horizon`` paired episodes), median_episodes, fixed_matched,
    ratio_to_matched (see :func:`design_grid`)."""
    from scipy import stats

    rows = []
    t = np.arange(1, horizon + 1)
    for share in DESIGN_SHARES:
        stop = stopping(share)
        for rate in DESIGN_DISCORDANCE:
            # P(stopped by episode t) = sum over k of P(stop at the k-th discordant pair)
            # P(at least k discordant among t episodes)
            cdf = stats.binom.sf(t[None, :] - 1, t[:, None], rate) @ stop[1:]
            decided = float(cdf[-1])
            median = int(t[np.searchsorted(cdf, 0.5)]) if decided >= 0.5 else horizon
            wins = round(decided * orders)
            fixed = fixed_size_episodes(rate * share, rate * (1 - share), alpha,
                                        matched_power(wins, orders)) if wins else None
            rows.append({"discordance": rate, "share": share, "decided": decided,
                         "median_episodes": median, "fixed_matched": fixed,
                         "ratio_to_matched": median / fixed if fixed else np.nan})
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_dir", nargs="?", default=None)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--orders", type=int, default=50)
    parser.add_argument("--metric", choices=["success", "progress"], default="success")
    parser.add_argument("--run-fresh", action="store_true",
                        help="first run the fresh candidates (the graded ladder) into RUNS_DIR")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(FRESH_SEEDS),
                        help="the fresh candidates' task sets (with --run-fresh)")
    parser.add_argument("--budget-calibrated", action="store_true",
                        help="the success test at the exact threshold for the budget")
    parser.add_argument("--design-grid", action="store_true",
                        help="print the design grid (how the mixture's prior was chosen)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.design_grid:
        grid = design_grid(alpha=args.alpha, orders=args.orders)
        print(grid.to_string(index=False, float_format="{:.3f}".format))
        print(json.dumps({f"median_ratio_to_matched_prior_{prior:g}": float(frame.median())
                          for prior, frame in grid.groupby("prior")["ratio_to_matched"]}))
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            grid.to_csv(Path(args.out) / "design_grid.csv", index=False)
        return 0
    if args.runs_dir is None:
        parser.error("expected RUNS_DIR (or --design-grid)")
    try:
        if args.run_fresh:
            run_fresh_candidates(args.runs_dir, seeds=args.seeds)
        pairs = replay_pairs(candidate_outcomes(args.runs_dir), args.alpha, args.orders,
                             metric=args.metric, budget_calibrated=args.budget_calibrated)
    except ValueError as exc:
        print(f"sequential_validation: error: {exc}", file=sys.stderr)
        return 2
    summary = summarize(pairs)
    print(pairs.to_string(index=False, float_format="{:.3f}".format))
    print(json.dumps(summary))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        pairs.to_csv(Path(args.out) / "pairs.csv", index=False)
        (Path(args.out) / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
