"""Records: per-episode results in SQLite, videos and rollout arrays."""

from workbench.records.media import episode_filename, write_rollout, write_video
from workbench.records.store import EpisodeResult, RecordStore, load_results

__all__ = ["EpisodeResult", "RecordStore", "episode_filename", "load_results", "write_rollout",
           "write_video"]
