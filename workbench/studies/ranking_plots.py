"""Figures of the ranking studies: real against simulated success and the paper's
reported numbers against ours (notebook 10), rollouts' trajectories and frames side by
side (notebook 11), and the judge validation's heat maps (notebook 14).

Every function is ``plot_*(..., ax=None) -> (fig, ax)``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from workbench.reports.axes import figure_axes


def plot_real_vs_sim(means: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Mean real against mean simulated success (%) per policy, with the y = x line."""
    fig, ax = figure_axes(ax, (4.5, 4.5))
    ax.scatter(means["real"], means["sim"], color="tab:green")
    for policy, row in means.iterrows():
        ax.annotate(str(policy), (row["real"], row["sim"]), fontsize=8,
                    xytext=(3, 3), textcoords="offset points")
    top = float(max(means["real"].max(), means["sim"].max())) * 1.08
    ax.plot([0, top], [0, top], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("real success (%)")
    ax.set_ylabel("simulated success (%)")
    return fig, ax



def plot_real_sim_gaps(gaps: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Heat map of sim - real success (pp) per task (rows) and policy (columns)."""
    fig, ax = figure_axes(ax, (7, 4.5))
    table = gaps.pivot(index="task", columns="policy", values="gap_pp")
    bound = float(np.nanmax(np.abs(table.to_numpy()))) or 1.0
    image = ax.imshow(table.to_numpy(), cmap="PuOr", vmin=-bound, vmax=bound)
    ax.set_xticks(range(table.shape[1]), list(table.columns), rotation=45, ha="right")
    ax.set_yticks(range(table.shape[0]), list(table.index))
    fig.colorbar(image, ax=ax, label="sim - real (pp)")
    return fig, ax



def plot_reported_vs_recomputed(compared: pd.DataFrame, metric: str, ax: Any = None) -> tuple[Any, Any]:
    """Per judge, the recomputed ``metric`` (dot) and the paper's value (cross), with a
    line between them: the gap. The axis is zoomed to the values."""
    fig, ax = figure_axes(ax, (7, 3.5))
    x = np.arange(len(compared))
    mine, theirs = compared[metric].to_numpy(), compared[f"{metric}_reported"].to_numpy()
    ax.vlines(x, np.minimum(mine, theirs), np.maximum(mine, theirs), color="grey", linewidth=1)
    ax.plot(x, mine, "o", label="recomputed (2,000-comparison scores)")
    ax.plot(x, theirs, "x", markersize=9, label="reported (mean over checkpoints)")
    ax.set_xticks(x, list(compared.index), rotation=30, ha="right")
    ax.set_ylabel(metric)
    ax.margins(y=0.2)
    ax.legend(fontsize="small")
    return fig, ax



def plot_trajectory_pair(paths: Sequence[str], labels: Sequence[str], ax: Any = None,
                         gripper: bool = True) -> tuple[Any, Any]:
    """End-effector x, y, z against step for rollouts (``.npz`` paths): one colour per
    axis, one line style per rollout (solid, dashed, ...); with ``gripper`` the gripper
    command (what the offline judge's effort criterion reads) in grey on a right axis."""
    from workbench.records.rollout import load_rollout

    fig, ax = figure_axes(ax, (7, 3.5))
    right = ax.twinx() if gripper else None
    for path, label, style in zip(paths, labels, ("-", "--", ":", "-.")):
        rollout = load_rollout(path)
        for k, axis in enumerate("xyz"):
            ax.plot(rollout.state[:, k], linestyle=style, color=f"C{k}", label=f"{axis}: {label}")
        if right is not None:
            right.plot(rollout.actions[:, 3], linestyle=style, color="grey", linewidth=0.8,
                       label=f"gripper cmd: {label}")
    ax.set_xlabel("step")
    ax.set_ylabel("end-effector position (m)")
    handles, names = ax.get_legend_handles_labels()
    if right is not None:
        right.set_ylabel("gripper command", color="grey")
        extra = right.get_legend_handles_labels()
        handles, names = handles + extra[0], names + extra[1]
    ax.legend(handles, names, fontsize="x-small", ncol=len(paths), loc="upper left",
              bbox_to_anchor=(1.12, 1.0))
    return fig, ax



def plot_frame_pair(rows: Sequence[Sequence[np.ndarray]], labels: Sequence[str],
                    ax: Any = None) -> tuple[Any, Any]:
    """Frame strips stacked: ``rows[k]`` (frames of one rollout, spread over its episode)
    is row k, labelled ``labels[k]``; columns are titled by their share of the episode.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> black = np.zeros((8, 8, 3), np.uint8)
    >>> fig, ax = plot_frame_pair([[black] * 3, [black] * 3], ["top", "bottom"])
    >>> ax.get_images()[0].get_array().shape
    (16, 24, 3)
    """
    from workbench.reports import plot_frame_strip

    count = min(len(r) for r in rows)
    columns = [np.concatenate([r[k] for r in rows], axis=0) for k in range(count)]
    titles = [f"{k / max(count - 1, 1):.0%}" for k in range(count)]
    fig, ax = figure_axes(ax, (1.6 * count + 1.5, 1.7 * len(rows)))
    plot_frame_strip(columns, titles, ax=ax)
    height = rows[0][0].shape[0]
    for k, label in enumerate(labels):
        ax.text(-4, (k + 0.5) * height, label, ha="right", va="center", fontsize=8)
    return fig, ax



def plot_validation(summary: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Heatmaps (seaborn) of median Spearman and MMRV per method and K, each cell
    annotated ``median [lower, upper]`` (from
    :func:`workbench.studies.judge_validation.summarize_validation`); ``ax``: two axes or None."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    methods = ("success", "preference")
    if ax is None:
        fig, ax = plt.subplots(1, 2, figsize=(10, 2.6))
    else:
        fig = ax[0].figure
    for axis, metric, cmap in ((ax[0], "spearman", "viridis"), (ax[1], "mmrv", "viridis_r")):
        grid = summary.pivot(index="method", columns="k", values=metric).loc[list(methods)]
        text = summary.assign(cell=[f"{m:.2f}\n[{lo:.2f}, {hi:.2f}]" for m, lo, hi in zip(
            summary[metric], summary[f"{metric}_lower"], summary[f"{metric}_upper"])])
        labels = text.pivot(index="method", columns="k", values="cell").loc[list(methods)]
        sns.heatmap(grid, annot=labels, fmt="", cmap=cmap, cbar=False, ax=axis,
                    annot_kws={"fontsize": 8})
        axis.set_title(f"{'Spearman ρ' if metric == 'spearman' else 'MMRV'} vs reference "
                       "(median [95% of redraws])", fontsize=9)
        axis.set_xlabel("K rollouts per candidate")
        axis.set_ylabel("")
    fig.tight_layout()
    return fig, ax
