"""Per-episode media: MP4 videos (imageio-ffmpeg) and the names of episode files.

Rollout arrays have their own module, :mod:`workbench.records.rollout`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np


def episode_filename(episode_id: str, run_id: str | None = None) -> str:
    """A file-system-safe stem for an episode of a run (runs sharing a folder never
    overwrite each other's files).

    >>> episode_filename("metaworld/MT1:reach-v3/reach-v3/0001")
    'metaworld__MT1-reach-v3__reach-v3__0001'
    >>> episode_filename("metaworld/MT10/reach-v3/0001", run_id="expert-MT10")
    'expert-MT10__metaworld__MT10__reach-v3__0001'
    """
    name = episode_id if run_id is None else f"{run_id}/{episode_id}"
    return name.replace("/", "__").replace(":", "-")


def write_video(path: str | os.PathLike, frames: Sequence[np.ndarray], fps: int = 20) -> str:
    """Write (H, W, 3) uint8 frames as an H.264 MP4; returns the path."""
    import imageio.v2 as imageio

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=1,
                            ffmpeg_log_level="error") as writer:
        for frame in frames:
            writer.append_data(frame)
    return str(path)


def wants_video(video: str | int, episode_number: int) -> bool:
    """Whether to record the ``episode_number``-th episode (0-based) of a run.

    video: "off", "all", or N (the first N episodes).

    >>> [wants_video(2, i) for i in range(3)], wants_video("all", 9), wants_video("off", 0)
    ([True, True, False], True, False)
    """
    if video == "all":
        return True
    if video == "off" or video is None:
        return False
    return episode_number < int(video)
