"""Reports: figures with their numbers, plots, run and campaign reports (HTML/JSON),
and per-episode interaction histories."""

from workbench.reports.figures import figures_dir, save_figure
from workbench.reports.interaction_history import (interaction_history, write_histories,
                                                   write_interaction_history)
from workbench.reports.plots import (plot_frame_strip, plot_success, plot_success_intervals,
                                     read_video_frames)
from workbench.reports.run_report import (episode_outcomes, report_data, report_from_records,
                                          write_report)

__all__ = ["episode_outcomes", "figures_dir", "interaction_history", "plot_frame_strip",
           "plot_success", "plot_success_intervals", "read_video_frames", "report_data",
           "report_from_records", "save_figure", "write_histories", "write_interaction_history",
           "write_report"]
