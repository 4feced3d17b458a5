"""Plots of stage profiles. Each ``plot_*`` takes ``ax=None`` and returns ``(fig, ax)``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

GROUP_COLUMNS = ("observe", "batch_size")
VALUE_COLUMNS = ("per_step_ms", "wall_ms")


def plot_stage_profile(profile: pd.DataFrame, value: str | None = None, by: str | None = None,
                       ax: Any = None) -> tuple[Any, Any]:
    """Horizontal bars of ``value`` per stage, one bar per ``by`` setting within a stage.

    value defaults to ``per_step_ms`` (simulator profiles) or ``wall_ms`` (policy
    profiles); by defaults to ``observe`` or ``batch_size`` when the frame has
    more than one of them.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> df = pd.DataFrame({"stage": ["a", "b", "a", "b"], "per_step_ms": [1, 2, 3, 4],
    ...                    "observe": ["every_step"] * 2 + ["chunk_boundary"] * 2})
    >>> fig, ax = plot_stage_profile(df)
    >>> len(ax.patches)
    4
    """
    import matplotlib.pyplot as plt

    value = value or next(c for c in VALUE_COLUMNS if c in profile)
    by = by or next((c for c in GROUP_COLUMNS if c in profile and profile[c].nunique() > 1),
                    None)
    stages = list(dict.fromkeys(profile["stage"]))
    groups = list(dict.fromkeys(profile[by])) if by else [None]
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(stages) * max(len(groups), 1.5)))
    fig, height = ax.figure, 0.8 / len(groups)
    for i, group in enumerate(groups):
        rows = profile if group is None else profile[profile[by] == group]
        values = rows.set_index("stage")[value].reindex(stages)
        y = np.arange(len(stages)) + (i - (len(groups) - 1) / 2) * height
        ax.barh(y, values.to_numpy(float), height=height,
                label=None if group is None else f"{by}={group}")
    ax.set_yticks(np.arange(len(stages)), stages)
    ax.invert_yaxis()
    ax.set_xlabel(value)
    if by:
        ax.legend(loc="best", fontsize=8)
    return fig, ax
