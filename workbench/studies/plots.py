"""Plots of runtime measurements; each takes ``ax=None`` and returns ``(fig, ax)``."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from workbench.reports.axes import figure_axes


def plot_sweep(sweep: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Steps/s per (workers, replicas) configuration, busy cores annotated."""
    fig, ax = figure_axes(ax)
    labels = [f"{w}w/{r}r" for w, r in zip(sweep["workers"], sweep["replicas"])]
    bars = ax.bar(labels, sweep["steps_per_s"], color="tab:blue")
    for bar, cores in zip(bars, sweep["busy_cores"]):
        ax.annotate(f"{cores:.1f} cores", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("steps/s")
    ax.set_xlabel("simulator workers / policy replicas")
    return fig, ax


def plot_ladder(ladder: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Steps/s of each runtime variant, with its gain over the previous rung."""
    fig, ax = figure_axes(ax, figsize=(7, 3.5))
    bars = ax.barh(ladder["variant"][::-1], ladder["steps_per_s"][::-1], color="tab:green")
    for bar, gain in zip(bars, ladder["gain"][::-1]):
        text = "" if pd.isna(gain) else f" x{gain:.2f}"
        ax.annotate(text, (bar.get_width(), bar.get_y() + bar.get_height() / 2), va="center",
                    fontsize=8)
    ax.set_xlabel("steps/s")
    return fig, ax


def plot_probes(probes: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Steps/s of each search probe in order; failed probes in red."""
    fig, ax = figure_axes(ax)
    colors = np.where(probes["status"] == "ok", "tab:blue", "tab:red")
    labels = [f"{w}w/{r}r" for w, r in zip(probes["workers"], probes["replicas"])]
    ax.bar(range(len(probes)), probes["steps_per_s"], color=colors)
    ax.set_xticks(range(len(probes)), labels)
    ax.set_ylabel("probe steps/s")
    ax.set_xlabel("probe (workers/replicas), in search order")
    return fig, ax


def plot_outcome_agreement(tables: Mapping[str, pd.DataFrame], ax: Any = None) -> tuple[Any, Any]:
    """Success and terminal agreement per configuration, for each policy's table."""
    fig, ax = figure_axes(ax, figsize=(7, 3.5))
    width, offset = 0.8 / (2 * len(tables)), 0.0
    for name, table in tables.items():
        x = np.arange(len(table))
        ax.bar(x + offset, table["success_agreement"], width, label=f"{name}: success")
        ax.bar(x + offset + width, table["terminal_agreement"], width,
               label=f"{name}: terminal step")
        offset += 2 * width
    first = next(iter(tables.values()))
    ax.set_xticks(np.arange(len(first)) + 0.4 - width, first["configuration"])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("agreement with sequential")
    ax.legend(fontsize=7, loc="lower left")
    return fig, ax


def plot_probe_history(history: pd.DataFrame, axes: Any = None) -> tuple[Any, Any]:
    """Steps/s, busy cores and peak memory of every probe so far, side by side; probes
    made by hand (``source`` "manual") in blue, the search's in grey."""
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(10, 3))
    else:
        fig = axes[0].figure
    labels = [f"{r.workers}w/{r.replicas}r b{r.max_batch}" for r in history.itertuples()]
    manual = history.get("source", pd.Series(["manual"] * len(history))).eq("manual")
    colors = ["tab:blue" if m else "tab:gray" for m in manual]
    for ax, column, title in zip(axes, ("steps_per_s", "busy_cores", "peak_mem_gib"),
                                 ("steps/s", "busy cores", "peak memory (GiB)")):
        ax.bar(range(len(history)), history[column], color=colors)
        ax.set_xticks(range(len(history)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig, axes
