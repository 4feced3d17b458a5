"""The ranking figures drawn with seaborn carry their numbers."""

import matplotlib
import numpy as np

matplotlib.use("Agg")

from workbench.reports import ranking_plots as plots  # noqa: E402
from workbench.ranking.metrics import win_rate_matrix  # noqa: E402


def test_win_rate_heatmap_annotates_every_compared_pair_with_its_rate():
    wins = np.array([[0, 3, 4], [1, 0, 2], [0, 2, 0]])
    fig, ax = plots.plot_win_rates(wins, ["a", "b", "c"])
    rates = win_rate_matrix(wins)
    expected = [f"{v:.2f}" for v in rates.ravel() if np.isfinite(v)]  # diagonal left blank
    assert [t.get_text() for t in ax.texts] == expected == ["0.75", "1.00", "0.25", "0.50",
                                                           "0.00", "0.50"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert fig.axes[-1].get_ylabel() == "win rate"  # the colour bar
