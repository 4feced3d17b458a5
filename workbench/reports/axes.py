"""The one helper every ``plot_*(..., ax=None) -> (fig, ax)`` function starts with.

>>> import matplotlib; matplotlib.use("Agg")
>>> fig, ax = figure_axes(None, (3, 2))
>>> figure_axes(ax) == (fig, ax)
True
"""

from __future__ import annotations

from typing import Any


def figure_axes(ax: Any = None, figsize: tuple[float, float] = (6, 3.5)) -> tuple[Any, Any]:
    """``(fig, ax)``: a new figure of ``figsize`` when ``ax`` is None, else ``ax``'s own."""
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize)
