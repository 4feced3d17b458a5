"""Reports: figures with their numbers, plots, HTML/JSON run reports."""

from workbench.reports.figures import figures_dir, save_figure
from workbench.reports.plots import plot_frame_strip, plot_success, read_video_frames

__all__ = ["figures_dir", "plot_frame_strip", "plot_success", "read_video_frames", "save_figure"]
