"""R2S-Eval's pipeline on our own rollouts: graded scripted policies ranked by a judge.

Notebook 11 runs it. The policies are the graded variants of the MetaWorld expert
(:data:`workbench.policies.scripted.GRADED_LADDER`), whose quality order is known, so a
ranking can be checked against the truth and not only against success rates. Each
variant runs the same episodes (task and initial state), so every comparison is of two
rollouts from one task and one initial configuration (appendix D.9). The steps:

1. :func:`collect_graded_rollouts`: run the evaluator once per variant, one rollout
   table out (one row per episode, anonymous ``rollout_id``);
2. :func:`rank_with_judge`: sample comparisons, judge them, fit Bradley-Terry with
   bootstrap intervals and a convergence curve over nested checkpoints;
3. audits: :func:`order_swap_audit` (position bias), :func:`compare_rankings` (against
   the known order and success rates), :func:`same_success_separated` (what preference
   sees that success does not) and :func:`adaptive_vs_uniform` (judge calls saved).

Only the steps that run the simulator need MetaWorld; the rest work on any rollout
table (see :mod:`workbench.ranking.sampling`) and any judge.

>>> graded_policy_names()[:3]
['expert', 'expert-noise-0.1', 'expert-noise-0.1+jerky-0.3']
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from workbench.config import EvalConfig
from workbench.policies.scripted import GRADED_LADDER, ScriptedExpert
from workbench.ranking.adaptive import Oracle, adaptive_comparisons, uniform_comparisons
from workbench.ranking.bootstrap import BootstrapResult, bootstrap_bradley_terry
from workbench.ranking.bradley_terry import ConvergenceWarning, fit_bradley_terry_batch
from workbench.ranking.judges.base import Judge
from workbench.ranking.judges.offline import RolloutQuality, assess, pair_totals
from workbench.ranking.metrics import mmrv, order_swap_consistency, spearman_rho
from workbench.ranking.sampling import (
    RolloutIndex,
    candidate_pairs,
    convergence_curve,
    present,
    sample_comparisons,
    wins_from_preferences,
)
from workbench.records.rollout import load_rollout
from workbench.reports import read_video_frames
from workbench.runner import run
from workbench.studies.frame_replay import replay_frames
from workbench.studies.judging import judge_comparisons

Ladder = Sequence[Sequence[tuple[str, float]]]  # each rung: the defects it stacks
CRITERIA = ("smoothness", "continuity", "task", "effort")


def graded_policy_names(ladder: Ladder = GRADED_LADDER) -> list[str]:
    """Policy names of the ladder's variants, best first (the known order)."""
    return [ScriptedExpert(defects=rung).name for rung in ladder]


def anonymous_id(policy: str, task: str, init_id: int) -> str:
    """A rollout id that does not name the policy (judges never see policy identity).

    >>> anonymous_id("expert", "reach-v3", 0) == anonymous_id("expert", "reach-v3", 0)
    True
    """
    return "r" + hashlib.sha256(f"{policy}|{task}|{init_id}".encode()).hexdigest()[:12]


def rollout_table(results: pd.DataFrame) -> pd.DataFrame:
    """Evaluator results (``EvalRun.results``) -> a rollout table, one row per episode.

    Columns: policy, task, init_id, rollout_id, rollout_path, video_path, success,
    steps. Episodes that left no rollout file (errors before the first step) are dropped.

    >>> res = pd.DataFrame({"policy": ["p"], "task": ["t"], "init_state_id": [0],
    ...                     "rollout_path": ["x.npz"], "video_path": [None],
    ...                     "success": [True], "steps": [50]})
    >>> rollout_table(res)[["policy", "init_id", "success"]].values.tolist()
    [['p', 0, True]]
    """
    kept = results[results["rollout_path"].notna()]
    table = pd.DataFrame({
        "policy": kept["policy"].astype(str), "task": kept["task"].astype(str),
        "init_id": kept["init_state_id"].astype(int)})
    table["rollout_id"] = [anonymous_id(*key) for key in table.itertuples(index=False)]
    table["rollout_path"] = kept["rollout_path"].astype(str)
    table["video_path"] = kept["video_path"].where(kept["video_path"].notna(), None)
    table["success"] = kept["success"].fillna(False).astype(bool)
    table["steps"] = kept["steps"].astype(int)
    return table.reset_index(drop=True)


def collect_graded_rollouts(suite: str, tasks: Sequence[str] | None, episodes: int,
                            ladder: Ladder = GRADED_LADDER, output_dir: str = "runs/ranking",
                            image_size: int = 96, video: str | int = "off",
                            video_policies: Sequence[str] | None = None,
                            benchmark: str = "metaworld", seed: int = 0) -> pd.DataFrame:
    """Run every ladder variant on the same episodes; return their rollout table.

    Each variant runs through the runner and writes under ``output_dir/<policy>/``,
    resuming there: a second call with the same arguments runs nothing. ``video`` ("off",
    "all" or the first N episodes) applies to the variants in ``video_policies`` (all
    when None) and only to episodes this call runs (a resumed run records none);
    rendering is the slow part (software EGL: ~90 ms a frame), and
    :func:`replay_frames` renders just the frames a figure needs instead.
    Rows come in ladder order, so ``table["policy"].unique()`` is the known order.
    """
    frames = []
    for rung, name in zip(ladder, graded_policy_names(ladder)):
        wants = video_policies is None or name in video_policies
        config = EvalConfig(benchmark=benchmark, suite=suite, tasks=list(tasks) if tasks else None,
                            policy="expert", policy_options={"defects": [list(d) for d in rung]},
                            episodes=episodes, seed=seed, image_size=image_size,
                            output_dir=str(Path(output_dir) / name),
                            video=video if wants else "off", progress=False)
        frames.append(rollout_table(run(config).results))
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class RankingResult:
    """A judge's ranking of the policies in a rollout table.

    policies: names, in the table's order; preferences: one row per judged comparison
    (pair, slot, task, init_id, rollout_i/j, a_is_i, policy_a/b, rollout_a/b, winner,
    winner_policy, ...); wins: (n, n) int array, wins[i, j] = times i was preferred over
    j; bootstrap: BT point scores (0-100) with percentile intervals; convergence: long
    table of checkpoint, policy, score (and lower, upper, mean_ci_width);
    episode_intervals: policy, lower, upper from resampling episodes;
    warnings: what the fits warned about (e.g. a policy that never lost).
    """

    policies: list[str]
    preferences: pd.DataFrame
    wins: NDArray[np.int64]
    bootstrap: BootstrapResult
    convergence: pd.DataFrame
    episode_intervals: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def scores(self) -> pd.DataFrame:
        """One row per policy: score, lower, upper (0-100, the paper's bootstrap),
        episode_lower, episode_upper (:func:`bootstrap_over_episodes`), rank (1 = best)."""
        boot, episodes = self.bootstrap, self.episode_intervals
        table = pd.DataFrame({"policy": self.policies, "score": boot.scores,
                              "lower": boot.lower, "upper": boot.upper,
                              "episode_lower": episodes["lower"].to_numpy(),
                              "episode_upper": episodes["upper"].to_numpy()})
        table["rank"] = table["score"].rank(ascending=False, method="min").astype(int)
        return table

    def a_win_share(self) -> float:
        """Share of valid judgments won by the video shown as A (0.5 = no position bias)."""
        valid = self.preferences["winner"].isin(["A", "B"])
        return float(self.preferences.loc[valid, "winner"].eq("A").mean())


def default_checkpoints(comparisons_per_pair: int, count: int = 10) -> list[int]:
    """About ``count`` evenly spaced checkpoints ending at ``comparisons_per_pair``.

    >>> default_checkpoints(200, 4)
    [50, 100, 150, 200]
    """
    step = max(1, comparisons_per_pair // count)
    return sorted({*range(step, comparisons_per_pair + 1, step), comparisons_per_pair})


def rank_with_judge(rollouts: pd.DataFrame, judge: Judge, comparisons_per_pair: int,
                    seed: int = 0, checkpoints: Sequence[int] | None = None,
                    n_boot: int = 1000, curve_boot: int = 200,
                    records: str | Path | None = None) -> RankingResult:
    """Sample ``comparisons_per_pair`` comparisons per policy pair, judge, fit BT.

    Checkpoints are prefixes of one draw (``slot < k``), so they are nested; each
    gets a BT fit with ``curve_boot`` bootstrap replicates (0: point scores only).
    ``records``: a records SQLite that keeps the judge's accounting (label "ranking").
    """
    checkpoints = list(checkpoints or default_checkpoints(comparisons_per_pair))
    if max(checkpoints) > comparisons_per_pair or min(checkpoints) < 1:
        raise ValueError(f"checkpoints must lie in [1, {comparisons_per_pair}]; got {checkpoints}")
    policies = RolloutIndex(rollouts).policies
    comparisons = sample_comparisons(rollouts, comparisons_per_pair, seed=seed, policies=policies)
    preferences = judge_comparisons(comparisons, rollouts, judge, seed=seed, records=records)
    wins = wins_from_preferences(preferences, policies)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        boot = bootstrap_bradley_terry(wins, n_boot=n_boot, seed=seed)
        curve = convergence_curve(preferences, policies, checkpoints, n_boot=curve_boot, seed=seed)
    notes = sorted({str(w.message) for w in caught})
    episodes = bootstrap_over_episodes(preferences, policies, n_boot=n_boot, seed=seed)
    return RankingResult(policies, preferences, wins, boot, curve, episodes, notes)


def bootstrap_over_episodes(preferences: pd.DataFrame, policies: Sequence[str],
                            n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """BT intervals from resampling episodes, not comparisons.

    The paper's bootstrap redraws each pair's wins binomially, as if every comparison
    were a fresh draw; with few episodes and a deterministic judge the comparisons
    repeat the same rollout pairs, and those intervals only shrink with more calls.
    Here the unit is the episode (task, init_id): replicates draw episodes with
    replacement and pool their wins. Returns policy, lower, upper (0-100 scale).

    >>> prefs = pd.DataFrame({"task": ["t"] * 3 + ["u"] * 3, "init_id": 0,
    ...                       "policy_a": ["x", "x", "y"] * 2, "policy_b": ["y", "y", "x"] * 2,
    ...                       "winner": ["A", "A", "A", "B", "B", "B"]})  # x 2:1 in t, 1:2 in u
    >>> ci = bootstrap_over_episodes(prefs, ["x", "y"], n_boot=50)
    >>> ci[["lower", "upper"]].round(1).values.tolist()
    [[33.3, 66.7], [33.3, 66.7]]
    """
    valid = preferences[preferences["winner"].isin(["A", "B"])]
    groups = [part for _, part in valid.groupby(["task", "init_id"], sort=True)]
    per_episode = np.stack([wins_from_preferences(part, policies) for part in groups])
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(groups), np.full(len(groups), 1 / len(groups)), size=n_boot)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = fit_bradley_terry_batch(np.einsum("bc,cij->bij", counts, per_episode)).scores
    tail = 100.0 * (1 - level) / 2
    lower, upper = np.percentile(fits, [tail, 100.0 - tail], axis=0)
    return pd.DataFrame({"policy": list(policies), "lower": lower, "upper": upper})


def order_swap_audit(rollouts: pd.DataFrame, judge: Judge, n_pairs: int,
                     seed: int = 0) -> pd.DataFrame:
    """Judge up to ``n_pairs`` distinct rollout pairs (drawn without replacement) twice,
    as (x, y) and as (y, x) (appendix D.8).

    Columns: the pair (see :func:`~workbench.ranking.sampling.candidate_pairs`), a_is_i
    and the first presentation (policy_a/b, rollout_a/b; see
    :func:`~workbench.ranking.sampling.present`), first
    and swapped (the answers, 'A'/'B'/None) and consistent (the same video won both
    times; NaN when an answer was invalid). The consistency rate
    is ``order_swap_consistency(audit["first"], audit["swapped"])``.
    """
    pool = candidate_pairs(rollouts)
    rng = np.random.default_rng(seed)
    audit = pool.iloc[np.sort(rng.permutation(len(pool))[:n_pairs])].reset_index(drop=True)
    audit = present(audit.assign(a_is_i=rng.random(len(audit)) < 0.5))
    index = RolloutIndex(rollouts)
    first, swapped = [], []
    for a, b, task in zip(audit["rollout_a"], audit["rollout_b"], audit["task"]):
        first.append(judge.compare(index.ref(a), index.ref(b), task).winner)
        swapped.append(judge.compare(index.ref(b), index.ref(a), task).winner)
    audit["first"], audit["swapped"] = first, swapped
    flip = {"A": "B", "B": "A"}
    audit["consistent"] = [np.nan if f is None or s is None else float(f == flip[s])
                           for f, s in zip(first, swapped)]
    return audit


def swap_consistency(audit: pd.DataFrame) -> float:
    """Share of audited pairs whose preferred video survives the A/B swap."""
    return order_swap_consistency(audit["first"], audit["swapped"])


def ranking_table(scores: pd.DataFrame, known_order: Sequence[str],
                  success_rates: pd.DataFrame) -> pd.DataFrame:
    """Per policy, in the known order: known_rank, BT score (and interval), its rank,
    success rate with its Wilson interval, and the success rank (ties share a rank).

    ``scores`` has policy and score (lower, upper optional), as from
    :meth:`RankingResult.scores`; ``success_rates`` comes from
    :func:`workbench.ranking.metrics.success_rates`.
    """
    table = pd.DataFrame({"policy": list(known_order),
                          "known_rank": range(1, len(known_order) + 1)})
    keep = [c for c in ("policy", "score", "lower", "upper") if c in scores]
    table = table.merge(scores[keep], on="policy", how="left")
    table["score_rank"] = table["score"].rank(ascending=False, method="min").astype(int)
    success = success_rates.rename(columns={"rate": "success_rate", "lower": "success_lower",
                                            "upper": "success_upper"})
    table = table.merge(success[["policy", "n", "success_rate", "success_lower", "success_upper"]],
                        on="policy", how="left")
    table["success_rank"] = table["success_rate"].rank(ascending=False, method="min").astype(int)
    return table


def compare_rankings(scores: pd.DataFrame, known_order: Sequence[str],
                     success_rates: pd.DataFrame) -> pd.DataFrame:
    """The BT ranking and the success-rate ranking, each against the known order and
    against success rates: Spearman rho (NaN when a side is constant, e.g. all
    policies at 100% success), MMRV (success as the reference, 0-1 scale) and the
    order, best first (ties kept in the known order).

    >>> from workbench.ranking.metrics import success_rates
    >>> rolls = pd.DataFrame({"policy": ["a", "a", "b", "b"], "success": [1, 1, 1, 0]})
    >>> bt = pd.DataFrame({"policy": ["a", "b"], "score": [70.0, 30.0]})
    >>> table = compare_rankings(bt, ["a", "b"], success_rates(rolls))
    >>> table["spearman_vs_known"].round(3).tolist(), table.loc["bt_score", "order"]
    ([1.0, 1.0], 'a > b')
    """
    table = ranking_table(scores, known_order, success_rates)
    known = -table["known_rank"].to_numpy(float)
    success = table["success_rate"].to_numpy(float)
    rows = {}
    for name, values in (("bt_score", table["score"].to_numpy(float)), ("success_rate", success)):
        order = " > ".join(table["policy"].iloc[np.argsort(-values, kind="stable")])
        rows[name] = {"spearman_vs_known": spearman_rho(known, values),
                      "spearman_vs_success": spearman_rho(success, values),
                      "mmrv_vs_success": mmrv(success, values), "order": order}
    return pd.DataFrame.from_dict(rows, orient="index")


def _quality(path: str, cache: dict[str, RolloutQuality], reward_scale: float) -> RolloutQuality:
    if path not in cache:
        cache[path] = assess(load_rollout(path), reward_scale)
    return cache[path]


def _pair_verdicts(preferences: pd.DataFrame) -> pd.DataFrame:
    """Per distinct rollout pair: times judged and the share won by rollout_i."""
    valid = preferences[preferences["winner"].isin(["A", "B"])]
    won_i = valid["winner_policy"].eq(valid["policy_i"])
    keys = ["policy_i", "policy_j", "task", "init_id", "rollout_i", "rollout_j"]
    return (valid.assign(won_i=won_i).groupby(keys, sort=False)["won_i"]
            .agg(n_judged="size", share_i="mean").reset_index())


def same_success_separated(preferences: pd.DataFrame, rollouts: pd.DataFrame,
                           drop_quality_ties: bool = True,
                           reward_scale: float = 1.0) -> pd.DataFrame:
    """Rollout pairs with the same success label where the judge preferred one.

    One row per distinct pair that a majority of its judgments decided: task, init_id,
    success (the shared label), winner/loser policy, rollout, path and video,
    winner_share, and both rollouts' offline-heuristic criterion scores (``winner_`` /
    ``loser_`` + smoothness, continuity, task, effort, total) and ``total_gap``.
    With ``drop_quality_ties`` pairs whose heuristic totals are equal are left out:
    the offline judge decides those by a coin, which separates nothing. Sorted with
    pairs that have both videos first, then by ``total_gap``, largest first.
    ``reward_scale`` as the offline judge's (10 for MetaWorld).
    """
    info = rollouts.set_index("rollout_id")
    pairs = _pair_verdicts(preferences)
    success_i = info.loc[pairs["rollout_i"], "success"].to_numpy(bool)
    same = success_i == info.loc[pairs["rollout_j"], "success"].to_numpy(bool)
    pairs = pairs.assign(success=success_i)[same & (pairs["share_i"] != 0.5)]
    i_won = pairs["share_i"] > 0.5
    out = pd.DataFrame({"task": pairs["task"], "init_id": pairs["init_id"],
                        "success": pairs["success"], "n_judged": pairs["n_judged"],
                        "winner_share": np.where(i_won, pairs["share_i"], 1 - pairs["share_i"])})
    for side, pick in (("winner", i_won), ("loser", ~i_won)):
        out[f"{side}_policy"] = np.where(pick, pairs["policy_i"], pairs["policy_j"])
        out[f"{side}_rollout"] = np.where(pick, pairs["rollout_i"], pairs["rollout_j"])
        out[f"{side}_path"] = info.loc[out[f"{side}_rollout"], "rollout_path"].to_numpy()
        out[f"{side}_video"] = info.loc[out[f"{side}_rollout"], "video_path"].to_numpy()
    return _with_criteria(out, drop_quality_ties, reward_scale)


def _with_criteria(out: pd.DataFrame, drop_quality_ties: bool,
                   reward_scale: float) -> pd.DataFrame:
    """Add both sides' heuristic criterion scores, drop quality ties, sort."""
    cache: dict[str, RolloutQuality] = {}
    sides = {side: [_quality(p, cache, reward_scale) for p in out[f"{side}_path"]]
             for side in ("winner", "loser")}
    for side, qualities in sides.items():
        for name in CRITERIA:
            out[f"{side}_{name}"] = [getattr(q, name) for q in qualities]
    # the judge's own rule: totals with the pair's efficiency credit (both succeeded)
    totals = [pair_totals(w, l) for w, l in zip(sides["winner"], sides["loser"])]
    out["winner_total"] = [t[0] for t in totals]
    out["loser_total"] = [t[1] for t in totals]
    out["total_gap"] = out["winner_total"] - out["loser_total"] if len(out) else []
    if drop_quality_ties:
        out = out[~np.isclose(out["total_gap"].to_numpy(float), 0.0, rtol=0, atol=1e-12)]
    videos = out["winner_video"].notna() & out["loser_video"].notna()
    return (out.assign(_videos=videos).sort_values(["_videos", "total_gap"], ascending=False)
            .drop(columns="_videos").reset_index(drop=True))


def judge_oracle(rollouts: pd.DataFrame, judge: Judge, policies: Sequence[str],
                 seed: int = 0) -> Oracle:
    """An oracle for :mod:`workbench.ranking.adaptive`: ``oracle(i, j)`` draws a shared
    task (uniformly), init and rollouts of policies i and j, a random A/B order, asks
    ``judge`` and says whether i's rollout won (None when the answer was invalid)."""
    index, rng = RolloutIndex(rollouts), np.random.default_rng(seed)
    shared = {(i, j): index.shared(p, q) for i, p in enumerate(policies)
              for j, q in enumerate(policies) if i != j}

    def oracle(i: int, j: int) -> bool | None:
        tasks = list(shared[(i, j)])
        task = tasks[rng.integers(len(tasks))]
        _, ri, rj = index.draw(policies[i], policies[j], task, shared[(i, j)][task], rng)
        a_is_i = bool(rng.random() < 0.5)
        a, b = (ri, rj) if a_is_i else (rj, ri)
        winner = judge.compare(index.ref(a), index.ref(b), task).winner
        return None if winner is None else (winner == "A") == a_is_i

    return oracle


def adaptive_vs_uniform(rollouts: pd.DataFrame, judge: Judge, budget: int, seed: int = 0,
                        n_boot: int = 1000,
                        known_order: Sequence[str] | None = None) -> pd.DataFrame:
    """Uniform sampling with ``budget`` valid comparisons against adaptive allocation with
    half of it and with all of it, on the same rollouts and judge.

    One row per method: budget, judge_calls, ranking (best first), same_ranking (as
    uniform's), spearman_vs_known (when ``known_order`` is given), mean_ci_width
    (bootstrap, 0-100 scale) and, for the adaptive rows, ``meets_uniform``: same
    ranking and an interval at most as wide as uniform's.
    """
    policies = RolloutIndex(rollouts).policies
    n_pairs = len(policies) * (len(policies) - 1) // 2
    runs = {"uniform": uniform_comparisons(judge_oracle(rollouts, judge, policies, seed),
                                           len(policies), budget // n_pairs)}
    for k, share in enumerate((0.5, 1.0), start=1):
        spend = int(budget * share)
        warm = max(1, min(10, spend // (4 * n_pairs)))
        runs[f"adaptive ({share:.0%} budget)"] = adaptive_comparisons(
            judge_oracle(rollouts, judge, policies, seed + k), len(policies), spend,
            init_per_pair=warm)
    rows = [_method_row(name, run.wins, run.judge_calls, policies, n_boot, seed, known_order)
            for name, run in runs.items()]
    table = pd.DataFrame(rows).set_index("method")
    base = table.loc["uniform"]
    table["same_ranking"] = table["ranking"].eq(base["ranking"])
    meets = table["same_ranking"] & (table["mean_ci_width"] <= base["mean_ci_width"])
    table["meets_uniform"] = meets.astype(object).where(table.index != "uniform", None)
    return table


def _method_row(name: str, wins: NDArray[np.int64], calls: int, policies: Sequence[str],
                n_boot: int, seed: int, known_order: Sequence[str] | None) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        boot = bootstrap_bradley_terry(wins, n_boot=n_boot, seed=seed)
    order = [policies[k] for k in np.argsort(-boot.scores, kind="stable")]
    row = {"method": name, "budget": int(wins.sum()), "judge_calls": int(calls),
           "ranking": " > ".join(order), "mean_ci_width": boot.mean_ci_width}
    if known_order is not None:
        position = {p: k for k, p in enumerate(known_order)}
        row["spearman_vs_known"] = spearman_rho([-position[p] for p in policies], boot.scores)
    return row | {f"score[{p}]": s for p, s in zip(policies, boot.scores)}


def strip_example(separated: pd.DataFrame) -> pd.Series:
    """The pair to show as a frame strip: the first row of :func:`same_success_separated`
    (pairs with videos first, then the widest heuristic gap); refuses an empty table."""
    if separated.empty:
        raise ValueError("no same-success pair was separated by the judge; run more "
                         "episodes or tasks to have one to show")
    return separated.iloc[0]


def pair_frames(example: pd.Series, suite: str, count: int = 6, image_size: int = 96,
                benchmark: str = "metaworld") -> tuple[list[list[NDArray[np.uint8]]], float]:
    """Frames of both rollouts of a :func:`same_success_separated` row, winner first:
    read from their videos when both have one, else replayed (:func:`replay_frames`).
    Returns (rows of frames, largest replay state gap; 0 for videos)."""
    videos = [example["winner_video"], example["loser_video"]]
    if all(isinstance(v, str) and v for v in videos):
        return [read_video_frames(v, count) for v in videos], 0.0
    replays = [replay_frames(suite, example["task"], example["init_id"], path, count,
                             image_size, benchmark)
               for path in (example["winner_path"], example["loser_path"])]
    return [frames for frames, _ in replays], max(gap for _, gap in replays)
