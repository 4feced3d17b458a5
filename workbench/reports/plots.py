"""Plots for run results. Each ``plot_*`` takes ``ax=None`` and returns ``(fig, ax)``."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from workbench.reports.axes import figure_axes


def plot_success(summary: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Bar chart of success rate per task from :func:`workbench.contracts.results.summarize`."""
    fig, ax = figure_axes(ax)
    rows = summary[summary["task"] != "ALL"]
    ax.bar(rows["task"], rows["success_rate"], color="tab:blue")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    ax.tick_params(axis="x", rotation=45)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    return fig, ax


def plot_success_intervals(summary: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Success rate per task with its 95% Wilson interval, one marker per policy (the
    ``ALL`` rows last), from a report's summary rows (columns ``policy``, ``task``,
    ``success_rate``, ``success_low``, ``success_high``; rows without a rate are left
    out)."""
    rows = summary.dropna(subset=["success_rate"])
    tasks = sorted(set(rows["task"]) - {"ALL"}) + (["ALL"] if rows["task"].eq("ALL").any() else [])
    policies = sorted(rows["policy"].unique())
    fig, ax = figure_axes(ax, figsize=(7, 0.8 + 0.35 * len(tasks) * max(len(policies), 1)))
    height = 0.8 / max(len(policies), 1)
    for k, (policy, part) in enumerate(rows.groupby("policy", sort=True)):
        offset = (k - (len(policies) - 1) / 2) * height
        y = np.array([tasks.index(t) for t in part["task"]]) + offset
        rate = part["success_rate"].to_numpy(float)
        low = part["success_low"].to_numpy(float)
        high = part["success_high"].to_numpy(float)
        errors = np.clip([rate - low, high - rate], 0.0, None)  # rounding: never below 0
        ax.errorbar(rate, y, xerr=errors, fmt="o", capsize=3, label=policy)
    ax.set_yticks(range(len(tasks)), tasks)
    ax.invert_yaxis()
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("success rate (95% Wilson interval)")
    if len(policies) > 1:
        ax.legend(fontsize=7, loc="best")
    return fig, ax


def read_video_frames(path: str, count: int = 6) -> list[np.ndarray]:
    """``count`` frames spread uniformly over an MP4 (first and last included)."""
    import imageio.v3 as iio

    frames = iio.imread(path, plugin="pyav") if _has_pyav() else np.stack(list(iio.imiter(path)))
    idx = np.linspace(0, len(frames) - 1, num=min(count, len(frames))).round().astype(int)
    return [frames[i] for i in idx]


def _has_pyav() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def plot_frame_strip(frames: Sequence[np.ndarray], titles: Sequence[str] | None = None,
                     ax: Any = None) -> tuple[Any, Any]:
    """Frames side by side in one image, optionally titled per frame."""
    fig, ax = figure_axes(ax, figsize=(2.2 * max(len(frames), 1), 2.4))
    ax.imshow(np.concatenate(list(frames), axis=1))
    ax.set_axis_off()
    if titles:
        width = frames[0].shape[1]
        for i, title in enumerate(titles):
            ax.text(i * width + width / 2, -6, title, ha="center", fontsize=8)
    return fig, ax
