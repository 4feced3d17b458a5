"""A panel to probe pool configurations by hand.

Sliders for simulator workers, policy replicas, maximum batch and maximum wait; the
button runs one short probe of the config's workload at those settings
(:class:`workbench.studies.runtime.ProbeSession`) and plots steps/s, busy cores and
peak memory next to the earlier probes (a search's, when given as ``history``). The
plot is an image widget (its PNG bytes), not captured output, so the panel behaves the
same in JupyterLab and in a notebook run in batch by papermill.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from workbench.config import EvalConfig, PoolConfig
from workbench.studies.plots import plot_probe_history
from workbench.studies.runtime import ProbeSession


def probe_panel(config: EvalConfig | Mapping[str, Any], max_workers: int = 4,
                max_replicas: int = 2, history: pd.DataFrame | None = None,
                start: PoolConfig | None = None) -> Any:
    """The panel (an ``ipywidgets.VBox``); its ``session`` attribute holds the probes.

    history: earlier probes shown on the plot from the start (a search's probe table);
    start: where the sliders begin (a search's choice, say).
    """
    import io

    import ipywidgets as w
    import matplotlib.pyplot as plt

    session = ProbeSession(config, max_workers, max_replicas, history)
    start = start or PoolConfig(min(2, max_workers), 1)
    workers = w.IntSlider(value=min(start.workers, max_workers), min=1, max=max_workers,
                          description="workers")
    replicas = w.IntSlider(value=min(start.replicas, max_replicas), min=1, max=max_replicas,
                           description="replicas")
    batch = w.IntSlider(value=start.batch, min=1, max=64, description="max batch")
    wait = w.FloatSlider(value=start.max_wait_ms, min=0.0, max=50.0, step=0.5,
                         description="wait (ms)")
    button = w.Button(description="Run probe", button_style="primary")
    status, plot = w.Label(value=""), w.Image(format="png")

    def show() -> None:
        if session.rows:
            fig, _ = plot_probe_history(session.history)
            png = io.BytesIO()
            fig.savefig(png, format="png", dpi=90, bbox_inches="tight")
            plt.close(fig)
            plot.value = png.getvalue()

    def on_click(_: Any) -> None:
        button.disabled, status.value = True, "probing..."
        try:
            row = session.probe(PoolConfig(workers.value, min(replicas.value, workers.value),
                                           batch.value, wait.value))
            status.value = f"{row['steps_per_s']:.1f} steps/s, {row['busy_cores']:.2f} cores"
            show()
        except Exception as exc:  # shown in the panel; the session stays usable
            status.value = f"probe failed: {exc}"
        finally:
            button.disabled = False

    button.on_click(on_click)
    show()
    panel = w.VBox([w.HBox([workers, replicas]), w.HBox([batch, wait]),
                    w.HBox([button, status]), plot])
    panel.session = session
    return panel
