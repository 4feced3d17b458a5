"""Which rollout pairs to compare, and from the answers: wins matrices and convergence.

R2S-Eval appendix D.9: for each unordered policy pair, comparisons of two rollouts that
share task and initial configuration, spread over tasks as evenly as possible (counts
differ by at most one), drawn with replacement; A/B positions randomised and balanced
per pair (Table VII). Checkpoints of 500..2000 comparisons per pair reuse one draw:
checkpoint k is the first k comparisons (``slot < k``) of each pair, and tasks are dealt
round-robin, so every prefix is as even over tasks as the whole, and A/B positions come
in pairs (a coin picks which policy is A in the first, the second swaps), so every
prefix is balanced within one.

A rollout table is a DataFrame with columns ``policy``, ``task``, ``init_id``,
``rollout_id`` (unique) and optionally ``path`` (.npz) and ``video`` (.mp4), which may
also be spelled ``rollout_path`` and ``video_path`` as in the evaluator's results.

>>> table = demo_rollout_table(["p", "q"], tasks=["t1", "t2"], inits=2, repeats=1)
>>> comps = sample_comparisons(table, 5, seed=0)
>>> comps["task"].value_counts().tolist(), int(comps["a_is_i"].sum()) in (2, 3)
([3, 2], True)
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from workbench.ranking.bootstrap import bootstrap_bradley_terry
from workbench.ranking.bradley_terry import fit_bradley_terry
from workbench.ranking.judges.base import RolloutRef

REQUIRED = ("policy", "task", "init_id", "rollout_id")


def demo_rollout_table(policies: Sequence[str], tasks: Sequence[str], inits: int = 3,
                       repeats: int = 2) -> pd.DataFrame:
    """A rollout table with ``repeats`` rollouts per policy, task and init (no files)."""
    rows = [(p, t, i, f"{p}/{t}/{i}/{r}") for p in policies for t in tasks
            for i in range(inits) for r in range(repeats)]
    return pd.DataFrame(rows, columns=list(REQUIRED))


def checkpoints(start: int = 500, stop: int = 2000, step: int = 100) -> list[int]:
    """Comparison budgets per pair at which to refit, inclusive (paper: 500..2000 by 100).

    >>> checkpoints(100, 300, 100)
    [100, 200, 300]
    """
    return list(range(start, stop + 1, step))


class RolloutIndex:
    """Lookups over a rollout table: rollouts per (policy, task, init), shared inits."""

    def __init__(self, rollouts: pd.DataFrame) -> None:
        missing = [c for c in REQUIRED if c not in rollouts.columns]
        if missing:
            raise ValueError(f"rollout table lacks columns {missing}; need {list(REQUIRED)}")
        if rollouts["rollout_id"].duplicated().any():
            raise ValueError("rollout_id must be unique in the rollout table")
        self.table = rollouts.reset_index(drop=True)
        groups = self.table.groupby(["policy", "task", "init_id"], sort=True)["rollout_id"]
        self.by_key = {key: np.asarray(ids) for key, ids in groups}
        self._refs: dict[str, RolloutRef] | None = None

    def ref(self, rollout_id: str) -> RolloutRef:
        """The anonymous reference a judge sees: id, npz path and video, no policy."""
        if self._refs is None:
            cols = {c: self._column(c, alias) for c, alias in (("path", "rollout_path"),
                                                               ("video", "video_path"))}
            self._refs = {str(r): RolloutRef(str(r), _text(p), _text(v)) for r, p, v in
                          zip(self.table["rollout_id"], cols["path"], cols["video"])}
        return self._refs[str(rollout_id)]

    def _column(self, name: str, alias: str) -> pd.Series:
        """Column ``name``, else ``alias`` (the evaluator's spelling), else all None."""
        for col in (name, alias):
            if col in self.table:
                return self.table[col]
        return pd.Series([None] * len(self.table))

    @property
    def policies(self) -> list[str]:
        """Policies in order of first appearance."""
        return list(dict.fromkeys(self.table["policy"]))

    def shared(self, p: str, q: str) -> dict[str, list]:
        """Tasks (sorted) mapped to the init_ids both policies have rollouts for."""
        out: dict[str, list] = {}
        for (policy, task, init) in self.by_key:
            if policy == p and (q, task, init) in self.by_key:
                out.setdefault(task, []).append(init)
        return dict(sorted(out.items()))

    def draw(self, p: str, q: str, task: str, inits: Sequence, rng: np.random.Generator) -> tuple:
        """One comparison of ``task``: (init_id, rollout of p, rollout of q), uniform draws."""
        init = inits[rng.integers(len(inits))]
        first, second = self.by_key[(p, task, init)], self.by_key[(q, task, init)]
        return init, first[rng.integers(len(first))], second[rng.integers(len(second))]


def _text(value: object) -> str | None:
    return None if value is None or pd.isna(value) else str(value)


def _pair_comparisons(index: RolloutIndex, p: str, q: str, n: int, seed: int,
                      pair: int) -> list[tuple]:
    shared = index.shared(p, q)
    if not shared:
        raise ValueError(f"policies {p!r} and {q!r} share no (task, init_id) to compare on")
    rng = np.random.default_rng([seed, pair])
    tasks = [list(shared)[k] for k in rng.permutation(len(shared))]
    rows, a_is_i = [], True
    for slot in range(n):  # draws in slot order, so a shorter run is a prefix of a longer
        task = tasks[slot % len(tasks)]
        a_is_i = bool(rng.random() < 0.5) if slot % 2 == 0 else not a_is_i
        init, ri, rj = index.draw(p, q, task, shared[task], rng)
        rows.append((pair, p, q, slot, task, init, ri, rj, a_is_i))
    return rows


def sample_comparisons(rollouts: pd.DataFrame, n_comparisons: int, seed: int = 0,
                       policies: Sequence[str] | None = None) -> pd.DataFrame:
    """Draw ``n_comparisons`` per unordered policy pair (see module doc); seeded.

    Returns one row per comparison: pair, policy_i, policy_j, slot, task, init_id,
    rollout_i, rollout_j, a_is_i and the presented policy_a/b, rollout_a/b.
    """
    if n_comparisons < 1:
        raise ValueError(f"n_comparisons: expected positive; got {n_comparisons}")
    index = RolloutIndex(rollouts)
    names = list(policies) if policies is not None else index.policies
    rows = [row for k, (p, q) in enumerate(combinations(names, 2))
            for row in _pair_comparisons(index, p, q, n_comparisons, seed, k)]
    table = pd.DataFrame(rows, columns=["pair", "policy_i", "policy_j", "slot", "task",
                                        "init_id", "rollout_i", "rollout_j", "a_is_i"])
    return present(table)


def present(table: pd.DataFrame) -> pd.DataFrame:
    """Add policy_a/policy_b/rollout_a/rollout_b from the i/j columns and ``a_is_i``."""
    flip = ~table["a_is_i"]
    return table.assign(
        policy_a=table["policy_i"].where(~flip, table["policy_j"]),
        policy_b=table["policy_j"].where(~flip, table["policy_i"]),
        rollout_a=table["rollout_i"].where(~flip, table["rollout_j"]),
        rollout_b=table["rollout_j"].where(~flip, table["rollout_i"]))


def wins_from_preferences(preferences: pd.DataFrame, policies: Sequence[str]) -> NDArray[np.int64]:
    """Wins (n, n) from rows with policy_a, policy_b and winner ('A', 'B', None=invalid).

    >>> prefs = pd.DataFrame({"policy_a": ["x", "y", "x"], "policy_b": ["y", "x", "y"],
    ...                       "winner": ["A", "A", None]})
    >>> wins_from_preferences(prefs, ["x", "y"]).tolist()
    [[0, 1], [1, 0]]
    """
    position = {p: k for k, p in enumerate(policies)}
    unknown = (set(preferences["policy_a"]) | set(preferences["policy_b"])) - set(position)
    if unknown:
        raise ValueError(f"preferences name policies not in the list: {sorted(unknown)}")
    bad = set(preferences["winner"].dropna()) - {"A", "B"}
    if bad:
        raise ValueError(f"winner must be 'A', 'B' or None; found {sorted(map(str, bad))}")
    valid = preferences[preferences["winner"].isin(["A", "B"])]
    is_a = valid["winner"].eq("A").to_numpy()
    won = np.where(is_a, valid["policy_a"], valid["policy_b"])
    lost = np.where(is_a, valid["policy_b"], valid["policy_a"])
    wins = np.zeros((len(policies), len(policies)), np.int64)
    np.add.at(wins, ([position[p] for p in won], [position[p] for p in lost]), 1)
    return wins


def convergence_curve(preferences: pd.DataFrame, policies: Sequence[str],
                      budgets: Sequence[int], n_boot: int = 0, seed: int = 0) -> pd.DataFrame:
    """BT scores per checkpoint from the first k comparisons (``slot < k``) of each pair.

    Returns long rows: checkpoint, policy, score and, with ``n_boot`` > 0, lower, upper
    and the checkpoint's mean_ci_width.
    """
    frames = []
    for k in budgets:
        wins = wins_from_preferences(preferences[preferences["slot"] < k], policies)
        frame = pd.DataFrame({"checkpoint": k, "policy": list(policies)})
        if n_boot > 0:
            res = bootstrap_bradley_terry(wins, n_boot=n_boot, seed=seed)
            frame = frame.assign(score=res.scores, lower=res.lower, upper=res.upper,
                                 mean_ci_width=res.mean_ci_width)
        else:
            frame = frame.assign(score=fit_bradley_terry(wins).scores)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def budgets_within(available: int, start: int = 500, stop: int = 2000, step: int = 100
                   ) -> list[int]:
    """The paper's comparison budgets per pair (``start`` to ``stop`` by ``step``) that a
    run with ``available`` comparisons per pair can refit at.

    >>> budgets_within(800), budgets_within(300)
    ([500, 600, 700, 800], [])
    """
    return [k for k in checkpoints(start, stop, step) if k <= available]


def metrics_over_budgets(preferences: pd.DataFrame, policies: Sequence[str],
                         reference: dict[str, float], budgets: Sequence[int],
                         n_boot: int = 0, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    """Ranking metrics of the BT scores against ``reference`` (a value per policy, higher
    is better) at each comparison budget (the first k comparisons of every pair), and
    their means over the budgets: the paper reports its metrics as these means, over 500
    to 2,000 comparisons per pair in steps of 100.

    Returns one row per budget (budget, spearman, pearson, mmrv; mean_ci_width with
    ``n_boot``) and the means (NaN-skipping: Spearman is NaN where the scores tie).

    >>> table = demo_rollout_table(["p", "q", "r"], tasks=["t"], inits=2, repeats=1)
    >>> prefs = sample_comparisons(table, 6, seed=0)
    >>> prefs = prefs.assign(winner=np.where(prefs["policy_a"] < prefs["policy_b"], "A", "B"))
    >>> per_budget, mean = metrics_over_budgets(prefs, ["p", "q", "r"],
    ...                                         {"p": 0.9, "q": 0.5, "r": 0.1}, [2, 4, 6])
    >>> per_budget["budget"].tolist(), round(mean["spearman"], 3), round(mean["mmrv"], 3)
    ([2, 4, 6], 1.0, 0.0)
    """
    from workbench.ranking.metrics import mmrv, pearson_r, spearman_rho

    curve = convergence_curve(preferences, policies, budgets, n_boot=n_boot, seed=seed)
    truth = np.array([reference[p] for p in policies], dtype=float)
    rows = []
    for budget, part in curve.groupby("checkpoint", sort=True):
        scores = part.set_index("policy").loc[list(policies), "score"].to_numpy(float)
        constant = np.ptp(scores) == 0 or np.ptp(truth) == 0
        row = {"budget": int(budget),
               "spearman": np.nan if constant else spearman_rho(truth, scores),
               "pearson": np.nan if constant else pearson_r(truth, scores),
               "mmrv": mmrv(truth, scores)}
        if n_boot > 0:
            row["mean_ci_width"] = float(part["mean_ci_width"].iloc[0])
        rows.append(row)
    table = pd.DataFrame(rows)
    return table, table.drop(columns="budget").mean()


def candidate_pairs(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Every comparable rollout pair: two policies, one task and init_id.

    Columns policy_i, policy_j (i before j in the table's policy order), task, init_id,
    rollout_i, rollout_j.
    """
    index = RolloutIndex(rollouts)
    rows = [(p, q, task, init, ri, rj)
            for p, q in combinations(index.policies, 2)
            for task, inits in index.shared(p, q).items() for init in inits
            for ri in index.by_key[(p, task, init)] for rj in index.by_key[(q, task, init)]]
    return pd.DataFrame(rows, columns=["policy_i", "policy_j", "task", "init_id",
                                       "rollout_i", "rollout_j"])
