"""Figures of rankings: Bradley-Terry scores with intervals, convergence over comparisons,
win rates, and judges' agreement with the human majority.

Every function is ``plot_*(..., ax=None) -> (fig, ax)``; save with
:func:`workbench.reports.save_figure`. The ranking core (:mod:`workbench.ranking`) draws
nothing itself, so it imports no plotting library.

>>> import matplotlib; matplotlib.use("Agg")
>>> fig, ax = plot_scores(["a", "b"], [60.0, 40.0], [55.0, 35.0], [65.0, 45.0])
>>> ax.get_ylabel()
'BT score (0-100)'
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from workbench.ranking.metrics import win_rate_matrix
from workbench.reports.axes import figure_axes


def plot_scores(policies: Sequence[str], scores: ArrayLike, lower: ArrayLike | None = None,
                upper: ArrayLike | None = None, ax: Any = None) -> tuple[Any, Any]:
    """Bars of BT scores per policy, with interval whiskers when given."""
    fig, ax = figure_axes(ax, (6, 4))
    s = np.asarray(scores, np.float64)
    err = None
    if lower is not None and upper is not None:
        # clipped at 0: with a policy that never loses, the percentile interval of the
        # bootstrap need not contain the (iteration-capped) point estimate
        err = np.clip(np.vstack([s - np.asarray(lower), np.asarray(upper) - s]), 0, None)
    ax.bar(list(policies), s, yerr=err, capsize=4, color="tab:blue", alpha=0.8)
    ax.set_ylabel("BT score (0-100)")
    ax.tick_params(axis="x", rotation=30)
    return fig, ax



def plot_convergence(curve: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Score per policy against comparisons per pair (from ``convergence_curve``)."""
    fig, ax = figure_axes(ax, (6, 4))
    for policy, part in curve.groupby("policy", sort=False):
        ax.plot(part["checkpoint"], part["score"], marker=".", label=str(policy))
        if "lower" in part:
            ax.fill_between(part["checkpoint"], part["lower"], part["upper"], alpha=0.15)
    ax.set_xlabel("comparisons per policy pair")
    ax.set_ylabel("BT score (0-100)")
    ax.legend(fontsize="small")
    return fig, ax



def plot_win_rates(wins: ArrayLike, policies: Sequence[str], ax: Any = None) -> tuple[Any, Any]:
    """Seaborn heat map of win rates, each cell annotated: the row policy's share of
    wins against the column policy (blank where a pair was never compared)."""
    import seaborn as sns

    fig, ax = figure_axes(ax, (5, 4.5))
    rates = pd.DataFrame(win_rate_matrix(wins), index=list(policies), columns=list(policies))
    sns.heatmap(rates, vmin=0, vmax=1, cmap="RdBu_r", annot=True, fmt=".2f",
                annot_kws={"fontsize": 7}, square=True, cbar_kws={"label": "win rate"}, ax=ax)
    ax.set_xticklabels(ax.get_xticklabels(), rotation=45, ha="right")
    ax.set_xlabel("against")
    ax.set_ylabel("policy")
    return fig, ax



def plot_judge_agreement(table: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Seaborn heat map of an agreement table (from
    :func:`workbench.ranking.agreement.judge_agreement_table`), each cell annotated: per rater
    (row, with its pair count), agreement with the majority and Cohen's kappa (both on a
    -1..1 colour scale; blank where undefined).

    >>> import matplotlib; matplotlib.use("Agg")
    >>> table = pd.DataFrame({"n_pairs": [10], "agreement": [0.9], "cohen_kappa": [0.8]},
    ...                      index=pd.Index(["judge"], name="rater"))
    >>> fig, ax = plot_judge_agreement(table)
    >>> [t.get_text() for t in ax.texts]
    ['0.90', '0.80']
    """
    import seaborn as sns

    fig, ax = figure_axes(ax, (5, 1.0 + 0.45 * len(table)))
    values = table[["agreement", "cohen_kappa"]].astype(float)
    values.index = [f"{rater} (n={n})" for rater, n in zip(table.index, table["n_pairs"])]
    values.columns = ["agreement with majority", "Cohen's kappa"]
    sns.heatmap(values, vmin=-1, vmax=1, center=0, cmap="RdBu_r", annot=True, fmt=".2f",
                cbar_kws={"label": "agreement / kappa"}, ax=ax)
    ax.set_ylabel("rater")
    return fig, ax

