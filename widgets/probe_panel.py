"""A panel to probe runtime configurations by hand.

Sliders for simulator workers, policy replicas, maximum batch and maximum wait; the
button runs one short probe of the workload at those settings
(:class:`workbench.runtime.experiments.ProbeSession`) and plots steps/s, busy cores
and peak memory next to the earlier probes.
"""

from __future__ import annotations

from typing import Any

from workbench.runtime.experiments import ProbeSession, Workload
from workbench.runtime.plots import plot_probe_history
from workbench.runtime.pool import PoolConfig


def probe_panel(workload: Workload, max_workers: int = 4, max_replicas: int = 2) -> Any:
    """The panel (an ``ipywidgets.VBox``); its ``session`` attribute holds the probes."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    session = ProbeSession(workload, max_workers, max_replicas)
    workers = w.IntSlider(value=min(2, max_workers), min=1, max=max_workers,
                          description="workers")
    replicas = w.IntSlider(value=1, min=1, max=max_replicas, description="replicas")
    batch = w.IntSlider(value=2, min=1, max=64, description="max batch")
    wait = w.FloatSlider(value=5.0, min=0.0, max=50.0, step=0.5, description="wait (ms)")
    button = w.Button(description="Run probe", button_style="primary")
    status, out = w.Label(value=""), w.Output()

    def on_click(_: Any) -> None:
        button.disabled, status.value = True, "probing..."
        try:
            config = PoolConfig(workers.value, min(replicas.value, workers.value), batch.value,
                                wait.value)
            row = session.probe(config)
            status.value = f"{row['steps_per_s']:.1f} steps/s, {row['cpu_cores']:.2f} cores"
            with out:
                out.clear_output(wait=True)
                fig, _ = plot_probe_history(session.history)
                display(fig)
                plt.close(fig)
        except Exception as exc:  # shown in the panel; the session stays usable
            status.value = f"probe failed: {exc}"
        finally:
            button.disabled = False

    button.on_click(on_click)
    panel = w.VBox([w.HBox([workers, replicas]), w.HBox([batch, wait]),
                    w.HBox([button, status]), out])
    panel.session = session
    return panel
