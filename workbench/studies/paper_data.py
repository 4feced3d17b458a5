"""R2S-Eval's published numbers: load the shared CSVs, recompute, compare with the paper.

The CSVs ship with the package (``workbench/data/papers``, copied from the project's
``shared/papers``; see its README): Table II (real and simulated success per task and
policy), Tables IX and X (BT scores per VLM judge at the 2,000-comparison checkpoint). The paper's validation metrics (Tables III and IV) are
transcribed below; they are averages over checkpoints 500..2000, so one checkpoint's
scores need not reproduce them exactly.

>>> papers = find_papers_dir()
>>> scores = load_bt_scores(papers, "real_to_sim")
>>> ref = reference_success(load_real_sim_success(papers))
>>> float(judge_metrics(scores, ref).loc["Qwen3-VL-4B", "rho"].round(3))
0.943
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.ranking.metrics import mmrv, pearson_r, spearman_rho

SETTINGS = {"real_to_sim": "r2s_eval_bt_scores_real_to_sim.csv",
            "libero": "r2s_eval_bt_scores_libero.csv"}
SUCCESS_CSV = "r2s_eval_real_sim_success.csv"
METRICS = ("rho", "r", "mmrv", "bt_ci", "agreement_pct")

# Tables III (LIBERO) and IV (real-to-sim), in the paper's row order. Judge names use
# the CSVs' spelling ("Gemma-3-4B"); the tables print "Gemma3-4B".
_TABLE_III = [
    ("Qwen3-VL-4B", 0.813, 0.915, 0.019, 1.231, 80.5),
    ("Qwen3-VL-8B", 0.823, 0.926, 0.018, 1.312, 83.5),
    ("Qwen3-VL-32B", 0.813, 0.935, 0.020, 1.429, 87.0),
    ("LLaVA-OV-1.5-4B", 0.829, 0.929, 0.017, 1.414, 85.0),
    ("LLaVA-OV-1.5-8B", 0.829, 0.908, 0.017, 1.346, 83.0),
    ("Gemma-3-4B", 0.829, 0.903, 0.017, 1.285, 78.0),
    ("Gemma-3-12B", 0.829, 0.941, 0.017, 1.392, 84.0),
    ("Gemma-3-27B", 0.823, 0.939, 0.018, 1.285, 82.0),
]
_TABLE_IV = [
    ("Qwen3-VL-4B", 0.943, 0.957, 0.007, 1.712, 90.0),
    ("Qwen3-VL-8B", 0.943, 0.984, 0.007, 1.750, 91.5),
    ("Qwen3-VL-32B", 1.000, 0.973, 0.000, 1.771, 92.0),
    ("LLaVA-OV-1.5-4B", 0.943, 0.989, 0.006, 1.827, 88.5),
    ("LLaVA-OV-1.5-8B", 1.000, 0.984, 0.000, 1.807, 90.0),
    ("Gemma-3-4B", 0.943, 0.981, 0.005, 1.725, 92.0),
    ("Gemma-3-12B", 0.943, 0.968, 0.009, 1.722, 93.0),
    ("Gemma-3-27B", 0.943, 0.980, 0.007, 1.741, 90.5),
]
REPORTED_TABLE_III = pd.DataFrame(_TABLE_III, columns=["judge", *METRICS]).set_index("judge")
REPORTED_TABLE_IV = pd.DataFrame(_TABLE_IV, columns=["judge", *METRICS]).set_index("judge")
REPORTED = {"libero": REPORTED_TABLE_III, "real_to_sim": REPORTED_TABLE_IV}
# The tables' printed "Avg." rows.
REPORTED_AVERAGES = pd.DataFrame(
    [(0.823, 0.924, 0.018, 1.337, 82.9), (0.957, 0.978, 0.005, 1.757, 91.9)],
    columns=list(METRICS), index=pd.Index(["libero", "real_to_sim"], name="setting"))
# Sec. IV-A: mean absolute real-sim gap 2.13 pp, largest 7.0 pp, same policy ranking.
REPORTED_REAL_SIM = {"mean_abs_gap_pp": 2.13, "max_gap_pp": 7.0, "same_ranking": True}


def average_rows_check() -> pd.DataFrame:
    """Printed "Avg." rows of Tables III/IV against the mean of their judge rows.

    Long form: setting, metric, printed, row_mean, gap. (Table IV's agreement column
    averages to 90.9, not the printed 91.9.)
    """
    rows = []
    for setting, table in REPORTED.items():
        for metric in METRICS:
            printed, mean = REPORTED_AVERAGES.loc[setting, metric], table[metric].mean()
            rows.append((setting, metric, printed, mean, mean - printed))
    return pd.DataFrame(rows, columns=["setting", "metric", "printed", "row_mean", "gap"])


PACKAGED = Path(__file__).resolve().parents[1] / "data" / "papers"


def find_papers_dir(hint: str | os.PathLike | None = None) -> Path:
    """The folder of published CSVs: ``hint`` when given (it must hold them), else the
    copy that ships with the package."""
    path = PACKAGED if not hint else Path(hint)
    if not (path / SUCCESS_CSV).is_file():
        raise FileNotFoundError(f"no {SUCCESS_CSV} in {path}; leave papers_dir empty for the "
                                f"copy that ships with the workbench ({PACKAGED})")
    return path.resolve()


def load_bt_scores(papers_dir: str | os.PathLike, setting: str) -> pd.DataFrame:
    """BT scores (%) per judge (rows) and policy (columns) for ``setting``."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; available: {sorted(SETTINGS)}")
    return pd.read_csv(Path(papers_dir) / SETTINGS[setting], index_col="judge")


def load_real_sim_success(papers_dir: str | os.PathLike) -> pd.DataFrame:
    """Table II long form: task, policy, real_success_pct, sim_success_pct."""
    return pd.read_csv(Path(papers_dir) / SUCCESS_CSV)


def reference_success(success: pd.DataFrame, column: str = "real_success_pct") -> pd.Series:
    """Mean success (%) over tasks per policy: the paper's reference performance."""
    return success.groupby("policy", sort=False)[column].mean()


def consensus_reference(scores: pd.DataFrame, judge: str) -> pd.Series:
    """Leave-one-out reference: mean score of every judge but ``judge``, per policy."""
    return scores.drop(index=judge).mean(axis=0)


def judge_metrics(scores: pd.DataFrame, reference: pd.Series | None = None,
                  reference_scale: float = 100.0) -> pd.DataFrame:
    """Per judge: Spearman rho, Pearson r and MMRV of its scores against ``reference``.

    ``reference`` (per policy) is divided by ``reference_scale`` for MMRV, so success
    rates in % become 0-1 as in SimplerEnv. Without a reference each judge is compared
    with the mean of the other judges (leave-one-out consensus).
    """
    rows = {}
    for judge, row in scores.iterrows():
        ref = consensus_reference(scores, judge) if reference is None else reference
        ref = ref.loc[row.index].to_numpy(np.float64)
        rows[judge] = {"rho": spearman_rho(ref, row), "r": pearson_r(ref, row),
                       "mmrv": mmrv(ref / reference_scale, row)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("judge")


def compare_with_reported(recomputed: pd.DataFrame, reported: pd.DataFrame,
                          by: str = "name", tol: float = 0.0015) -> pd.DataFrame:
    """Side by side, per judge: recomputed and reported rho, r, mmrv, their gaps and
    ``matches`` (all gaps within ``tol``, i.e. rounding). ``by="position"`` pairs rows by
    order (CSV order against the table's order) instead of by judge name."""
    cols = ["rho", "r", "mmrv"]
    if by == "position":
        rep = reported[cols].set_axis(recomputed.index[: len(reported)])
    elif by == "name":
        rep = reported[cols]
    else:
        raise ValueError(f"by: expected 'name' or 'position'; got {by!r}")
    both = recomputed[cols].join(rep.add_suffix("_reported"), how="inner")
    for c in cols:
        both[f"{c}_gap"] = both[c] - both[f"{c}_reported"]
    both["matches"] = (both[[f"{c}_gap" for c in cols]].abs() <= tol).all(axis=1)
    return both


def gap_totals(compared: pd.DataFrame) -> pd.Series:
    """Sum of absolute gaps per metric of a :func:`compare_with_reported` table."""
    return compared[["rho_gap", "r_gap", "mmrv_gap"]].abs().sum()


def real_sim_gaps(success: pd.DataFrame) -> pd.DataFrame:
    """Per task and policy: real, sim and gap (sim - real) in percentage points."""
    return success.assign(gap_pp=success["sim_success_pct"] - success["real_success_pct"])


def real_sim_consistency(success: pd.DataFrame) -> dict[str, float | bool]:
    """Mean absolute and largest real-sim gap (pp), whether the policy ranking by mean
    success is the same in both domains, and Spearman rho of the two means.

    >>> c = real_sim_consistency(load_real_sim_success(find_papers_dir()))
    >>> round(c["mean_abs_gap_pp"], 2), c["max_gap_pp"], c["same_ranking"]
    (2.13, 7.0, True)
    """
    gaps = real_sim_gaps(success)["gap_pp"].abs()
    real = reference_success(success, "real_success_pct")
    sim = reference_success(success, "sim_success_pct").loc[real.index]
    same = list(real.sort_values(ascending=False).index) == list(sim.sort_values(ascending=False).index)
    return {"mean_abs_gap_pp": float(gaps.mean()), "max_gap_pp": float(gaps.max()),
            "same_ranking": bool(same), "spearman_rho": spearman_rho(real, sim)}


def policy_means(success: pd.DataFrame) -> pd.DataFrame:
    """Per policy: mean real and sim success (%), sorted by real success."""
    table = pd.DataFrame({"real": reference_success(success, "real_success_pct"),
                          "sim": reference_success(success, "sim_success_pct")})
    return table.sort_values("real", ascending=False).rename_axis("policy")


def simulated_budget_metrics(scores: pd.DataFrame, reference: pd.Series,
                             budgets: list[int] | None = None, repeats: int = 50,
                             seed: int = 0, reference_scale: float = 100.0) -> pd.DataFrame:
    """The paper's budget-averaged metrics, in kind, from its published final scores.

    The paper averages each metric over BT fits at 500, 600, ..., 2,000 comparisons per
    pair; only the 2,000-comparison scores are published. Here each judge's published
    scores are taken as the true BT strengths, ``max(budgets)`` comparisons per pair are
    drawn from them (nested, so a budget is a prefix), BT is refit at every budget and
    the metrics against ``reference`` are averaged over budgets, ``repeats`` times.

    One row per judge: ``<metric>_final`` (the published scores, as
    :func:`judge_metrics`), ``<metric>_averaged`` (median over repeats of the
    budget average) with ``_lower``/``_upper`` (2.5 and 97.5 percentiles over repeats),
    for metric in rho, r, mmrv. A simulation: it shows what averaging does to near-ties,
    not what the paper's own checkpoints were.
    """
    from workbench.ranking.bradley_terry import fit_bradley_terry_batch
    from workbench.ranking.sampling import checkpoints

    budgets = budgets or checkpoints(500, 2000, 100)
    rng, final = np.random.default_rng(seed), judge_metrics(scores, reference, reference_scale)
    ref = reference.loc[scores.columns].to_numpy(np.float64)
    rows = {}
    for judge, row in scores.iterrows():
        p = np.clip(row.to_numpy(np.float64), 1e-6, None)
        beats = p[:, None] / (p[:, None] + p[None, :])  # P(i preferred over j)
        draws = rng.random((repeats, max(budgets), len(p), len(p))) < beats
        upper = np.triu(np.ones((len(p), len(p)), bool), 1)
        # one draw per pair and comparison: i beat j above the diagonal, its complement below
        outcomes = np.where(upper, draws, ~np.swapaxes(draws, 2, 3)) & ~np.eye(len(p), dtype=bool)
        wins = np.stack([outcomes[:, :b].sum(axis=1) for b in budgets], axis=1)
        fits = fit_bradley_terry_batch(wins.reshape(-1, len(p), len(p))).scores
        per = np.array([[spearman_rho(ref, s), pearson_r(ref, s), mmrv(ref / reference_scale, s)]
                        for s in fits]).reshape(repeats, len(budgets), 3).mean(axis=1)
        out = {f"{m}_final": final.loc[judge, m] for m in ("rho", "r", "mmrv")}
        for k, m in enumerate(("rho", "r", "mmrv")):
            out[f"{m}_averaged"] = float(np.median(per[:, k]))
            out[f"{m}_averaged_lower"], out[f"{m}_averaged_upper"] = np.percentile(
                per[:, k], [2.5, 97.5])
        rows[judge] = out
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("judge")


def budget_averaging_table(simulated: pd.DataFrame, reported: pd.DataFrame) -> pd.DataFrame:
    """Long table, one row per judge and metric (rho, r, mmrv): the metric from the
    published final scores, the simulated budget average with its interval, the
    paper's reported (budget-averaged) value, and whether that value lies in the
    simulated interval; judges paired by name."""
    rows = []
    for judge in simulated.index.intersection(reported.index):
        for m in ("rho", "r", "mmrv"):
            low, high = simulated.loc[judge, [f"{m}_averaged_lower", f"{m}_averaged_upper"]]
            value = reported.loc[judge, m]
            rows.append({"judge": judge, "metric": m,
                         "final (published scores)": simulated.loc[judge, f"{m}_final"],
                         "budget-averaged (simulated)": simulated.loc[judge, f"{m}_averaged"],
                         "simulated lower": low, "simulated upper": high,
                         "reported (paper)": value,
                         "reported within simulated": bool(low - 5e-4 <= value <= high + 5e-4)})
    return pd.DataFrame(rows)
