"""Table I of R2S-Eval in kind: the action-replay study's rows (one per trajectory,
:func:`workbench.studies.action_replay.action_replay_rows`) per task and in total, and
its heat map."""

from __future__ import annotations

from typing import Any

import pandas as pd

TABLE_COLUMNS = ("task", "trajectories", "real_success_rate", "replay_first_attempt",
                 "replay_within_n", "mean_attempts")


def table_one(rows: pd.DataFrame) -> pd.DataFrame:
    """Table I in kind, one row per task plus ``Total / Avg.``: trajectories, real success
    rate, replay success on the first attempt and within N attempts, and mean attempts
    used, the last three over the trajectories replayed (``attempts > 0``; NaN if none).

    >>> rows = pd.DataFrame({"task": ["a", "a"], "real_success": [True, True],
    ...                      "first_attempt": [True, False], "within_n": [True, True],
    ...                      "attempts": [1, 3]})
    >>> table_one(rows).loc[0, ["replay_within_n", "mean_attempts"]].tolist()
    [1.0, 2.0]
    """
    per_task = [_table_row(str(task), group) for task, group in rows.groupby("task", sort=False)]
    return pd.DataFrame(per_task + [_table_row("Total / Avg.", rows)], columns=list(TABLE_COLUMNS))


def _table_row(task: str, rows: pd.DataFrame) -> dict[str, Any]:
    replayed = rows[rows["attempts"] > 0]
    return {"task": task, "trajectories": len(rows),
            "real_success_rate": float(rows["real_success"].mean()),
            "replay_first_attempt": float(replayed["first_attempt"].mean()),
            "replay_within_n": float(replayed["within_n"].mean()),
            "mean_attempts": float(replayed["attempts"].mean())}


def plot_table_one(table: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Heat map of Table I's rates (percent) per task, each cell annotated.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> t = pd.DataFrame([["a", 2, 1.0, 0.5, 1.0, 2.0]], columns=list(TABLE_COLUMNS))
    >>> fig, ax = plot_table_one(t)
    >>> len(ax.texts)
    3
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    rates = table.set_index("task")[["real_success_rate", "replay_first_attempt",
                                     "replay_within_n"]] * 100
    rates.columns = ["real success", "replay: first attempt", "replay: within N"]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 0.5 * len(rates) + 1.6))
    sns.heatmap(rates, annot=True, fmt=".1f", vmin=0, vmax=100, cmap="viridis",
                cbar_kws={"label": "% (replay columns: of the replayed real successes)"}, ax=ax)
    ax.set_ylabel("")
    ax.set_title("Automatic action replay (Table I in kind)")
    return ax.figure, ax
