"""Frames for a VLM: sample a video at a set FPS, cap the count, encode as data URLs.

R2S-Eval (Table VII) samples at 10 FPS and subsamples uniformly when a video is too
long. Frames are sent as base64 JPEG ``image_url`` parts of a chat message.

>>> frame_indices(n_frames=30, video_fps=30.0, fps=10.0, max_frames=100).tolist()
[0, 3, 6, 9, 12, 15, 18, 21, 24, 27]
>>> frame_indices(n_frames=300, video_fps=30.0, fps=10.0, max_frames=4).tolist()
[0, 99, 198, 297]
>>> len(frame_indices(n_frames=300, video_fps=30.0, fps=10.0, max_frames=None))
100
"""

from __future__ import annotations

import base64
import hashlib
import os

import numpy as np
from numpy.typing import NDArray


def frame_indices(n_frames: int, video_fps: float, fps: float, max_frames: int | None
                  ) -> NDArray[np.int64]:
    """Indices of the frames kept: every ``video_fps / fps``-th (the whole video), then,
    with ``max_frames``, at most that many spread uniformly over those (first and last
    kept included)."""
    if fps <= 0 or (max_frames is not None and max_frames < 1):
        raise ValueError(f"fps: expected > 0 and max_frames >= 1; got {fps}, {max_frames}")
    step = max(video_fps / fps, 1.0)
    picked = np.unique(np.floor(np.arange(0, n_frames, step)).astype(np.int64))
    if max_frames is not None and len(picked) > max_frames:
        picked = picked[np.round(np.linspace(0, len(picked) - 1, max_frames)).astype(np.int64)]
    return picked


def read_frames(path: str | os.PathLike, fps: float = 10.0, max_frames: int | None = None
                ) -> list[NDArray[np.uint8]]:
    """Decode the MP4 at ``path`` and return the sampled RGB frames (H, W, 3) uint8."""
    import imageio.v3 as iio

    video_fps = float(iio.immeta(path).get("fps") or fps)
    frames = list(iio.imiter(path))
    if not frames:
        raise ValueError(f"{path}: no frames")
    return [frames[i] for i in frame_indices(len(frames), video_fps, fps, max_frames)]


def frame_data_url(frame: NDArray[np.uint8], fmt: str = "jpeg") -> str:
    """A ``data:image/...;base64,`` URL for one frame."""
    import imageio.v3 as iio

    data = iio.imwrite("<bytes>", frame, extension=f".{fmt}")
    return f"data:image/{fmt};base64,{base64.b64encode(data).decode('ascii')}"


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes, the content half of a description cache key."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
