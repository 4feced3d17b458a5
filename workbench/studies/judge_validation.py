"""Held-out validation of a judge: does preference ranking beat success counting?

The claim R2S-Eval rests on: with the same few rollouts per policy, Bradley-Terry over
a judge's pairwise preferences ranks policies closer to their true quality than the
success rate of those rollouts. Here the truth is each candidate's success rate over
many reference episodes (Wilson intervals say how sure it is), measured on starts that
no draw uses. The candidates come from training (:mod:`workbench.studies.candidates`),
so nobody, the judge's author included, designed their order.

The steps:

1. :func:`collect_candidate_rollouts`: every candidate runs the same episodes through
   the runner; :func:`split_by_init` keeps initial states ``< pool_inits`` as the pool
   to draw from and the rest as the reference (:func:`reference_table`);
2. :func:`judge_episode_pairs`: the judge compares every pair of candidates once on
   every pool episode (one task and initial state, random A/B);
3. :func:`draw_rankings`: for each K and each of ``draws`` redraws of K pool episodes
   (the same episodes for every candidate), rank by the success rate of those K
   rollouts and by BT over the judge's verdicts on them; score both against the
   reference (Spearman, Pearson, MMRV) and record their interval widths;
4. :func:`summarize_validation`: medians with percentile intervals over the redraws,
   and the paired difference (preference minus success) per K.

The judge must be frozen before the run: :func:`judge_digest` records the hash of the
judge's source beside the results, so a later change to it shows.

>>> import numpy as np
>>> success = np.array([[1, 1, 0], [1, 0, 0], [0, 1, 0], [1, 1, 1]])  # 4 episodes, 3 policies
>>> wins = np.zeros((4, 3, 3), int); wins[:, 0, 2] = wins[:, 1, 2] = wins[:, 0, 1] = 1
>>> table = draw_rankings(success, wins, reference=[0.9, 0.6, 0.1], ks=[2], draws=3,
...                       n_boot=20, seed=0)
>>> sorted(table["method"].unique()), table.groupby("method")["k"].size().tolist()
(['preference', 'success'], [3, 3])
"""

from __future__ import annotations

import hashlib
import inspect
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from workbench.config import EvalConfig
from workbench.ranking.bootstrap import bootstrap_bradley_terry
from workbench.ranking.judges.base import Judge
from workbench.ranking.metrics import mmrv, pearson_r, spearman_rho, success_rates
from workbench.ranking.sampling import RolloutIndex, candidate_pairs, present
from workbench.runner import run
from workbench.studies.own_rollouts import rollout_table

METHODS = ("success", "preference")
METRICS = ("spearman", "pearson", "mmrv", "ci_width")


def judge_digest(judge: Any) -> str:
    """First 12 hex digits of the sha256 of the module that defines ``judge``'s class."""
    source = Path(inspect.getfile(type(judge))).read_bytes()
    return hashlib.sha256(source).hexdigest()[:12]


def collect_candidate_rollouts(candidates: pd.DataFrame, suite: str, tasks: Sequence[str],
                               episodes: int, output_dir: str | Path, seed: int = 0,
                               backend: str = "sequential", workers: int = 2,
                               demo_seed: int | None = None) -> pd.DataFrame:
    """Run every candidate (rows with ``policy`` and ``options``, as from
    :func:`~workbench.studies.candidates.train_candidates`) on initial states
    ``0 .. episodes-1`` of each task of the ``seed`` task set; one rollout table
    (resumes per candidate). ``demo_seed``, the task set the candidates learned from,
    must differ from ``seed``."""
    if demo_seed is not None and demo_seed == seed:
        raise ValueError(f"the evaluation task set (seed {seed}) is the one the candidates' "
                         "demonstrations came from; evaluate on another seed")
    frames = []
    for row in candidates.itertuples(index=False):
        config = EvalConfig(benchmark="metaworld", suite=suite, tasks=list(tasks),
                            policy=row.policy, policy_options=dict(row.options),
                            episodes=episodes, seed=seed, backend=backend,
                            pool={"workers": workers, "replicas": 1},
                            output_dir=str(Path(output_dir) / row.candidate),
                            interactions=False, progress=False)
        result = run(config)
        # a policy error is the candidate's failure; a harness error is nobody's result
        errors = result.results["error_kind"].eq("infrastructure")
        if errors.any():
            raise RuntimeError(f"candidate {row.candidate}: {int(errors.sum())} episodes "
                               f"ended in infrastructure errors (recorded in "
                               f"{config.output_dir}), e.g. "
                               f"{result.results.loc[errors, 'error_message'].iloc[0]}; "
                               "retry them before validating")
        frames.append(rollout_table(result.results))
    return pd.concat(frames, ignore_index=True)


def collect_reference_rollouts(candidates: pd.DataFrame, suite: str, tasks: Sequence[str],
                               seeds: Sequence[int], episodes: int, output_dir: str | Path,
                               backend: str = "sequential", workers: int = 2,
                               demo_seed: int | None = None,
                               pool_seed: int = 0) -> pd.DataFrame:
    """More reference episodes: every candidate on initial states ``0 .. episodes-1`` of
    the task sets ``seeds`` (other than the pool's, ``pool_seed``, and the
    demonstrations'), under ``output_dir/reference-seed<s>``; one table with a
    ``task_set`` column (empty when ``seeds`` is)."""
    if pool_seed in seeds:
        raise ValueError(f"reference task set {pool_seed} is the pool's: its episodes "
                         "would be drawn and scored against at once")
    frames = [collect_candidate_rollouts(candidates, suite, tasks, episodes,
                                         Path(output_dir) / f"reference-seed{s}", seed=s,
                                         backend=backend, workers=workers,
                                         demo_seed=demo_seed).assign(task_set=s)
              for s in seeds]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["policy", "task", "init_id", "rollout_id", "success", "task_set"])


def reference_reliability(reference: pd.DataFrame, draws: int = 200, seed: int = 0,
                          level: float = 0.95) -> dict[str, float]:
    """How well the reference agrees with itself: Spearman rho between the candidates'
    success rates on two random halves of the reference episodes (the same episodes
    for every candidate), over ``draws`` splits. A ranking from K rollouts cannot be
    expected to agree with the reference much better than the reference's own halves
    agree with each other. Returns median, lower, upper (percentiles over splits).

    >>> table = pd.DataFrame({"policy": ["a"] * 4 + ["b"] * 4, "task": "t",
    ...                       "init_id": [0, 1, 2, 3] * 2, "success": [1, 1, 1, 1, 0, 0, 0, 0]})
    >>> round(reference_reliability(table, draws=10)["median"], 3)
    1.0
    """
    episodes = reference[["task", "init_id"] + (["task_set"] if "task_set" in reference
                                                else [])].drop_duplicates()
    wide = reference.pivot_table(index=list(episodes.columns), columns="policy",
                                 values="success", aggfunc="mean").dropna()
    rng, values = np.random.default_rng(seed), []
    for _ in range(draws):
        half = rng.permutation(len(wide)) < len(wide) // 2
        first, second = wide[half].mean().to_numpy(), wide[~half].mean().to_numpy()
        values.append(_ranked(first, second)["spearman"])
    tail = 100.0 * (1 - level) / 2
    kept = np.asarray(values, float)[~np.isnan(values)]
    low, high = np.percentile(kept, [tail, 100 - tail])
    return {"median": float(np.median(kept)), "lower": float(low), "upper": float(high),
            "episodes_per_half": len(wide) // 2}


def split_by_init(rollouts: pd.DataFrame, pool_inits: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pool, reference): rows with ``init_id < pool_inits`` and the rest.

    >>> table = pd.DataFrame({"init_id": [0, 1, 2, 3]})
    >>> [len(part) for part in split_by_init(table, 1)]
    [1, 3]
    """
    if not 0 < pool_inits < rollouts["init_id"].max() + 1:
        raise ValueError(f"pool_inits must leave both a pool and a reference: got "
                         f"{pool_inits} with initial states 0..{rollouts['init_id'].max()}")
    pool = rollouts["init_id"] < pool_inits
    return rollouts[pool].reset_index(drop=True), rollouts[~pool].reset_index(drop=True)


def reference_table(reference: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per candidate, best first: n, rate, Wilson lower/upper, and
    ``separated_from_next``: its interval and the next candidate's do not overlap."""
    table = success_rates(reference, level=level).sort_values("rate", ascending=False,
                                                              kind="stable")
    table = table.reset_index(drop=True)
    separated = (table["lower"] > table["upper"].shift(-1)).astype(object)
    separated.iloc[-1] = np.nan  # the last candidate has no next
    table["separated_from_next"] = separated
    return table


def judge_episode_pairs(pool: pd.DataFrame, judge: Judge, seed: int = 0) -> pd.DataFrame:
    """Ask ``judge`` once per candidate pair per shared pool episode (random A/B).

    Columns of :func:`~workbench.ranking.sampling.candidate_pairs`, plus a_is_i and
    the presented policy_a/b, rollout_a/b (:func:`~workbench.ranking.sampling.present`),
    winner ('A'/'B'/None) and winner_policy. A judge with ``compare_many``
    (the VLM judge) gets every question in one call.
    """
    pairs = candidate_pairs(pool)
    rng, index = np.random.default_rng(seed), RolloutIndex(pool)
    pairs = present(pairs.assign(a_is_i=rng.random(len(pairs)) < 0.5))
    questions = [(index.ref(a), index.ref(b), task)
                 for a, b, task in zip(pairs["rollout_a"], pairs["rollout_b"], pairs["task"])]
    answers = (judge.compare_many(questions) if hasattr(judge, "compare_many")
               else [judge.compare(*q) for q in questions])
    pairs["winner"] = [answer.winner for answer in answers]
    pairs["winner_policy"] = np.where(pairs["winner"].eq("A"), pairs["policy_a"],
                                      np.where(pairs["winner"].eq("B"), pairs["policy_b"], None))
    return pairs


def episode_arrays(pool: pd.DataFrame, verdicts: pd.DataFrame, policies: Sequence[str]
                   ) -> tuple[pd.DataFrame, NDArray[np.int64], NDArray[np.int64]]:
    """Per pool episode (task, init_id) that every candidate ran: the episode keys,
    success (E, n) 0/1 and wins (E, n, n), wins[e, i, j] = 1 when the judge preferred
    i's rollout over j's on episode e."""
    position = {p: k for k, p in enumerate(policies)}
    ran = pool.groupby(["task", "init_id"])["policy"].nunique()
    keys = ran[ran == len(policies)].index.to_frame(index=False)
    row = {key: e for e, key in enumerate(zip(keys["task"], keys["init_id"]))}
    success = np.zeros((len(keys), len(policies)), np.int64)
    for task, init, policy, ok in pool[["task", "init_id", "policy", "success"]].itertuples(
            index=False):
        if (task, init) in row:
            success[row[(task, init)], position[policy]] = int(ok)
    wins = np.zeros((len(keys), len(policies), len(policies)), np.int64)
    decided = verdicts[verdicts["winner_policy"].notna()]
    for task, init, pi, pj, won in decided[["task", "init_id", "policy_i", "policy_j",
                                            "winner_policy"]].itertuples(index=False):
        if (task, init) in row:
            loser = pj if won == pi else pi
            wins[row[(task, init)], position[won], position[loser]] += 1
    return keys, success, wins


def _ranked(values: NDArray[np.float64], reference: NDArray[np.float64]) -> dict[str, float]:
    """Spearman, Pearson and MMRV of ``values`` against ``reference``; the
    correlations are NaN when either side is constant (no ranking to correlate)."""
    return {"spearman": spearman_rho(reference, values), "pearson": pearson_r(reference, values),
            "mmrv": mmrv(reference, values)}


def draw_rankings(success: ArrayLike, wins: ArrayLike, reference: ArrayLike,
                  ks: Sequence[int] = (5, 10, 20), draws: int = 200, n_boot: int = 200,
                  seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Both rankings from redraws of K pool episodes, scored against ``reference``.

    success: (E, n) 0/1; wins: (E, n, n) per-episode judge wins (from
    :func:`episode_arrays`); reference: (n,) success rates on the reference episodes.
    One row per (k, draw, method): spearman, pearson, mmrv (reference on the 0-1
    scale), ci_width (success: mean Wilson width in percentage points; preference: mean
    BT bootstrap width on the 0-100 score scale), ranked (the method's scores are not
    all tied), and each candidate's score as ``score[i]``.
    """
    from workbench.ranking.metrics import wilson_interval

    success, wins = np.asarray(success), np.asarray(wins)
    ref = np.asarray(reference, np.float64)
    n_episodes = len(success)
    bad = [k for k in ks if not 1 <= k <= n_episodes]
    if bad:
        raise ValueError(f"every K must lie in [1, {n_episodes}] (the pool episodes); got {bad}")
    rng, rows = np.random.default_rng(seed), []
    for k in ks:
        for draw in range(draws):
            chosen = rng.choice(n_episodes, size=k, replace=False)
            hits = success[chosen].sum(axis=0)
            lower, upper = wilson_interval(hits, np.full(len(hits), k), level)
            rate = hits / k
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                boot = bootstrap_bradley_terry(wins[chosen].sum(axis=0), n_boot=n_boot,
                                               seed=rng, level=level)
            for method, scores, width in (
                    ("success", rate, 100.0 * float(np.mean(upper - lower))),
                    ("preference", boot.scores, boot.mean_ci_width)):
                rows.append({"k": k, "draw": draw, "method": method, **_ranked(scores, ref),
                             "ci_width": width, "ranked": bool(np.ptp(scores) > 0),
                             **{f"score[{i}]": s for i, s in enumerate(scores)}})
    return pd.DataFrame(rows)


def summarize_validation(draws: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per (k, method): median and percentile interval over redraws of each metric
    (correlations over the draws where the method ranked at all), and share_ranked.
    Columns ``<metric>``, ``<metric>_lower``, ``<metric>_upper``."""
    tail = 100.0 * (1 - level) / 2
    rows = []
    for (k, method), part in draws.groupby(["k", "method"], sort=True):
        row: dict[str, Any] = {"k": k, "method": method, "draws": len(part),
                               "share_ranked": float(part["ranked"].mean())}
        for metric in METRICS:
            values = part[metric].dropna().to_numpy(float)
            row[metric] = float(np.median(values)) if len(values) else np.nan
            low, high = (np.percentile(values, [tail, 100 - tail]) if len(values)
                         else (np.nan, np.nan))
            row[f"{metric}_lower"], row[f"{metric}_upper"] = float(low), float(high)
        rows.append(row)
    return pd.DataFrame(rows)


def paired_difference(draws: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per k, preference minus success on the same draws: median and percentile
    interval of the Spearman and MMRV differences, and the share of draws where the
    preference ranking was strictly closer to the reference (higher rho; lower MMRV).
    A draw where success rates are all tied counts as rho 0 for success (no ranking)."""
    tail = 100.0 * (1 - level) / 2
    wide = draws.pivot_table(index=["k", "draw"], columns="method",
                             values=["spearman", "mmrv"], dropna=False)
    rows = []
    for k, part in wide.groupby(level="k"):
        rho = part["spearman"].fillna(0.0)
        d_rho = (rho["preference"] - rho["success"]).to_numpy()
        d_mmrv = (part["mmrv"]["preference"] - part["mmrv"]["success"]).to_numpy()
        rows.append({"k": k, "draws": len(part),
                     "rho_diff": float(np.median(d_rho)),
                     "rho_diff_lower": float(np.percentile(d_rho, tail)),
                     "rho_diff_upper": float(np.percentile(d_rho, 100 - tail)),
                     "preference_closer_rho": float(np.mean(d_rho > 0)),
                     "success_closer_rho": float(np.mean(d_rho < 0)),
                     "mmrv_diff": float(np.median(d_mmrv)),
                     "mmrv_diff_lower": float(np.percentile(d_mmrv, tail)),
                     "mmrv_diff_upper": float(np.percentile(d_mmrv, 100 - tail)),
                     "preference_closer_mmrv": float(np.mean(d_mmrv < 0)),
                     "success_closer_mmrv": float(np.mean(d_mmrv > 0))})
    return pd.DataFrame(rows)


def validation_verdict(summary: pd.DataFrame, difference: pd.DataFrame) -> pd.DataFrame:
    """Per k, which ranking came closer to the reference, on median Spearman and on
    median MMRV, and whether the paired difference's interval excludes 0."""
    wide = summary.pivot(index="k", columns="method", values=["spearman", "mmrv"])
    out = pd.DataFrame({"k": wide.index})
    for metric, better in (("spearman", np.greater), ("mmrv", np.less)):
        pref, succ = wide[metric]["preference"].to_numpy(), wide[metric]["success"].to_numpy()
        out[f"closer_by_{metric}"] = np.where(better(pref, succ), "preference",
                                              np.where(better(succ, pref), "success", "tie"))
    diff = difference.set_index("k").loc[out["k"]]
    out["rho_diff_excludes_0"] = ((diff["rho_diff_lower"] > 0) |
                                  (diff["rho_diff_upper"] < 0)).to_numpy()
    out["mmrv_diff_excludes_0"] = ((diff["mmrv_diff_lower"] > 0) |
                                   (diff["mmrv_diff_upper"] < 0)).to_numpy()
    return out


def validation_findings(summary: pd.DataFrame, difference: pd.DataFrame,
                        reference: pd.DataFrame,
                        reliability: dict[str, float] | None = None) -> list[str]:
    """Plain sentences, one on the reference and one per K, computed from the tables
    (for a notebook's conclusions); ``reliability`` from :func:`reference_reliability`."""
    wide = summary.set_index(["k", "method"])
    separated = reference["separated_from_next"].dropna().astype(bool)
    lines = [f"Reference: {len(reference)} candidates, {int(reference['n'].min())} to "
             f"{int(reference['n'].max())} reference episodes each, success rates "
             f"{reference['rate'].min():.0%} to {reference['rate'].max():.0%}; the Wilson "
             f"intervals separate {int(separated.sum())} of {len(separated)} neighbouring pairs"
             + ("." if reliability is None else
                f"; two halves of the reference agree with Spearman rho "
                f"{reliability['median']:.2f} [{reliability['lower']:.2f}, "
                f"{reliability['upper']:.2f}] ({reliability['episodes_per_half']} episodes "
                "per half).")]
    for row in difference.itertuples(index=False):
        pref, succ = wide.loc[(row.k, "preference")], wide.loc[(row.k, "success")]
        closer = ("preference" if pref["spearman"] > succ["spearman"] else
                  "success" if pref["spearman"] < succ["spearman"] else "neither")
        excludes = row.rho_diff_lower > 0 or row.rho_diff_upper < 0
        lines.append(
            f"K = {row.k}: Spearman rho {succ['spearman']:.2f} [{succ['spearman_lower']:.2f}, "
            f"{succ['spearman_upper']:.2f}] by success rate vs {pref['spearman']:.2f} "
            f"[{pref['spearman_lower']:.2f}, {pref['spearman_upper']:.2f}] by preference; MMRV "
            f"{succ['mmrv']:.3f} vs {pref['mmrv']:.3f}. Closer by median rho: {closer}; the "
            f"paired difference (preference - success) is {row.rho_diff:+.2f} "
            f"[{row.rho_diff_lower:+.2f}, {row.rho_diff_upper:+.2f}]"
            f"{', excluding 0' if excludes else ', including 0'}; preference closer in "
            f"{row.preference_closer_rho:.0%} of draws, success in {row.success_closer_rho:.0%}.")
    return lines
