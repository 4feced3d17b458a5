"""ipywidgets panels: controls laid out over library calls; they compute nothing."""

from widgets.annotator import annotator_panel
from widgets.probe_panel import probe_panel

__all__ = ["annotator_panel", "probe_panel"]
