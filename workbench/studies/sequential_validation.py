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
and the episodes a fixed-size exact McNemar test at the same alpha needs for 80% power
given the pair's discordance rates over the reference. Pairs whose reference difference
is itself not significant (Wilson intervals overlapping) are kept and marked: deciding
them either way, or not at all, is what a finite budget does.

``python -m workbench.studies.sequential_validation RUNS_DIR [--alpha 0.05] [--orders 50]``
reads every ``records.sqlite`` below RUNS_DIR (notebook 14's ``output_dir``) and prints
the table and summary; ``--out DIR`` writes them as CSV and JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import combinations
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from workbench.ranking.metrics import wilson_interval
from workbench.ranking.sequential import first_decision, fixed_size_episodes
from workbench.records import load_results


def candidate_outcomes(runs_dir: str | Path) -> pd.DataFrame:
    """One row per (candidate, episode identity): policy, episode (task set, task,
    initial state), success; from every records file below ``runs_dir`` (episodes a
    harness error interrupted are left out)."""
    frames = []
    for path in sorted(Path(runs_dir).rglob("records.sqlite")):
        rows = load_results(path)
        rows = rows[(rows["status"] == "finished") & (rows["error_kind"] != "infrastructure")]
        if rows.empty:
            continue
        task_set = path.parent.parent.name  # rollouts/<candidate>, reference-seed<s>/<candidate>
        frames.append(pd.DataFrame({
            "policy": rows["policy"].astype(str),
            "episode": task_set + "/" + rows["task"].astype(str) + "/"
            + rows["init_state_id"].astype(str),
            "success": rows["success"].astype(bool).astype(float)}))
    if not frames:
        raise ValueError(f"{runs_dir}: expected records of notebook 14's candidates; got none")
    table = pd.concat(frames, ignore_index=True)
    return table.drop_duplicates(["policy", "episode"], keep="first")


def replay_pairs(outcomes: pd.DataFrame, alpha: float = 0.05, orders: int = 50,
                 power: float = 0.8, seed: int = 0) -> pd.DataFrame:
    """The replay of the sequential test per pair of candidates (see the module
    docstring); ``alpha`` per pair."""
    wide = outcomes.pivot(index="episode", columns="policy", values="success")
    rng = np.random.default_rng(seed)
    rows = []
    for a, b in combinations(sorted(wide.columns), 2):
        both = wide[[a, b]].dropna()
        x, y = both[a].to_numpy(), both[b].to_numpy()
        n = len(x)
        lo, hi = wilson_interval([x.sum(), y.sum()], [n, n])
        reference = "a" if x.mean() > y.mean() else "b" if y.mean() > x.mean() else None
        a_only, b_only = float(np.mean((x > 0.5) & (y <= 0.5))), float(np.mean((y > 0.5) &
                                                                               (x <= 0.5)))
        used, correct, decided = [], 0, 0
        for _ in range(orders):
            order = rng.permutation(n)
            state = first_decision(x[order], y[order], alpha)
            used.append(state.episodes)
            if state.decided:
                decided += 1
                correct += state.winner == reference
        fixed = fixed_size_episodes(a_only, b_only, alpha, power)
        rows.append({"a": a, "b": b, "episodes": n, "success_a": float(x.mean()),
                     "success_b": float(y.mean()), "reference": reference,
                     "reference_separated": bool(lo[0] > hi[1] or lo[1] > hi[0]),
                     "decided_share": decided / orders,
                     "correct_of_decided": correct / decided if decided else np.nan,
                     "median_episodes": float(np.median(used)), "fixed_size": fixed,
                     "ratio_to_fixed": float(np.median(used)) / fixed if fixed else np.nan})
    return pd.DataFrame(rows)


def summarize(pairs: pd.DataFrame) -> dict[str, float | int]:
    """Over the pairs: decided share, correct direction among decisions, and the median
    over pairs of the ratio of episodes used to the fixed-size test's."""
    weights = pairs["decided_share"]
    correct = float((pairs["correct_of_decided"].fillna(0) * weights).sum() / weights.sum()) \
        if weights.sum() else float("nan")
    separated = pairs[pairs["reference_separated"]]
    return {"pairs": len(pairs), "separated_pairs": len(separated),
            "decided_share": float(weights.mean()),
            "correct_direction_of_decided": correct,
            "median_ratio_to_fixed": float(pairs["ratio_to_fixed"].median()),
            "median_ratio_to_fixed_separated": float(separated["ratio_to_fixed"].median())
            if len(separated) else float("nan")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_dir")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--orders", type=int, default=50)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    try:
        pairs = replay_pairs(candidate_outcomes(args.runs_dir), args.alpha, args.orders)
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
