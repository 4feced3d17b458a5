"""Plots for run results. Each ``plot_*`` takes ``ax=None`` and returns ``(fig, ax)``."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from workbench.contracts.plotting import figure_axes


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
