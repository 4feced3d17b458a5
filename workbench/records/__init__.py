"""Records: per-episode results in SQLite, videos, and rollout arrays."""

from workbench.records.media import episode_filename, wants_video, write_video
from workbench.records.rollout import Rollout, load_rollout, save_rollout
from workbench.records.store import RecordStore, load_results

__all__ = ["RecordStore", "Rollout", "episode_filename", "load_results", "load_rollout",
           "save_rollout", "wants_video", "write_video"]
