"""A panel to probe pool configurations by hand.

Sliders for simulator workers, policy replicas, maximum batch and maximum wait; a line
beside them says what the next probe runs as the kernel has the sliders (a value reaches
the kernel a moment after the slider shows it); **Run probe** runs the config's whole
plan once at exactly those settings, with the search off
(:class:`workbench.studies.runtime.ProbeSession`), and adds the probe to a table and to
the plot of steps/s, busy cores and peak memory beside the earlier probes (a search's,
when given as ``history``). The pool stays warm between probes; a line shows what it
holds, and **Close pool** stops its processes (so does shutting the kernel down). The
plot is an image widget (its PNG bytes), not captured output, so the panel behaves the
same in JupyterLab and in a notebook run in batch by papermill.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from workbench.config import EvalConfig, PoolConfig
from workbench.runtime.search import GIB
from workbench.studies.plots import plot_probe_history
from workbench.studies.runtime import ProbeSession


def probe_panel(config: EvalConfig | Mapping[str, Any], max_workers: int = 4,
                max_replicas: int = 2, history: pd.DataFrame | None = None,
                start: PoolConfig | None = None) -> Any:
    """The panel (an ``ipywidgets.VBox``); its ``session`` attribute holds the probes and
    ``controls`` its widgets by name (workers, replicas, batch, wait, next, run, close,
    status, memory, workload, table, plot).

    history: earlier probes shown from the start (a search's probe table);
    start: where the sliders begin (a search's choice, say).
    """
    import ipywidgets as w

    session = ProbeSession(config, max_workers, max_replicas, history)
    start = start or PoolConfig(min(2, max_workers), 1)
    c = {"workers": w.IntSlider(value=min(start.workers, max_workers), min=1, max=max_workers,
                                description="workers"),
         "replicas": w.IntSlider(value=min(start.replicas, max_replicas), min=1,
                                 max=max_replicas, description="replicas"),
         "batch": w.IntSlider(value=start.batch, min=1, max=64, description="max batch"),
         "wait": w.FloatSlider(value=start.max_wait_ms, min=0.0, max=50.0, step=0.5,
                               description="wait (ms)"),
         "next": w.Label(value=""),
         "run": w.Button(description="Run probe", button_style="primary"),
         "close": w.Button(description="Close pool", button_style="warning"),
         "status": w.Label(value=""), "memory": w.Label(value=""),
         "workload": w.HTML(f"Each probe runs {session.workload}, at exactly the sliders' "
                            "settings."),
         "table": w.HTML(), "plot": w.Image(format="png")}

    def show() -> None:
        pool = session.pool
        c["memory"].value = ("no pool running" if pool is None else
                             f"warm pool: {len(pool.live_workers())} workers, "
                             f"{len(pool.live_replicas())} replicas, "
                             f"{session.memory_bytes() / GIB:.2f} GiB held (PSS)")
        c["close"].disabled = pool is None
        if session.rows:
            c["table"].value = _table_html(session.table)
            c["plot"].value = _png(plot_probe_history(session.history)[0])

    def asked() -> PoolConfig:
        return PoolConfig(c["workers"].value, c["replicas"].value, c["batch"].value,
                          c["wait"].value)

    def show_next(_: Any = None) -> None:
        pool_config = asked()
        c["next"].value = f"next probe: {pool_config.label}, wait {pool_config.max_wait_ms:g} ms"

    def on_run(_: Any) -> None:
        pool_config = asked()
        c["run"].disabled, c["close"].disabled = True, True
        c["status"].value = f"probing {pool_config.label}, wait {pool_config.max_wait_ms:g} ms..."
        try:
            row = session.probe(pool_config)
            c["status"].value = (f"probe {row['probe']} ({row['label']}, wait "
                                 f"{row['wait_ms']:g} ms): {row['episodes']} episodes, "
                                 f"{row['steps_per_s']:.1f} steps/s, "
                                 f"{row['busy_cores']:.2f} cores")
        except Exception as exc:  # shown in the panel; the session stays usable
            c["status"].value = f"probe {pool_config.label} failed: {exc}"
        finally:
            c["run"].disabled = False
            show()

    def on_close(_: Any) -> None:
        session.close_pool()
        c["status"].value = "pool closed: its processes are stopped"
        show()

    for name in ("workers", "replicas", "batch", "wait"):
        c[name].observe(show_next, names="value")
    c["run"].on_click(on_run)
    c["close"].on_click(on_close)
    show_next()
    show()
    panel = w.VBox([w.HBox([c["workers"], c["replicas"]]), w.HBox([c["batch"], c["wait"]]),
                    c["next"],
                    w.HBox([c["run"], c["close"], c["status"]]), c["memory"], c["workload"],
                    c["table"], c["plot"]])
    panel.session, panel.controls = session, c
    return panel


TABLE_STYLE = ("<style>.probe-table td,.probe-table th{padding:1px 8px;text-align:right}"
               "</style>")


def _table_html(table: pd.DataFrame) -> str:
    return TABLE_STYLE + table.to_html(index=False, float_format=lambda x: f"{x:.2f}", na_rep="",
                                       classes="probe-table", border=0)


def _png(fig: Any) -> bytes:
    import io

    import matplotlib.pyplot as plt

    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return png.getvalue()
