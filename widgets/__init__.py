"""ipywidgets panels: controls laid out over library calls; they compute nothing."""

from widgets.probe_panel import probe_panel

__all__ = ["probe_panel"]
