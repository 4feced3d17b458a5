"""Videos for human annotation: replay a sample's rollouts in their simulator and write
the frames the annotators watch (:mod:`workbench.ranking.annotation` samples the pairs
and keeps the answers; this is the part that needs a simulator)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from workbench.benchmarks import make_benchmark
from workbench.records.media import write_video
from workbench.studies.frame_replay import replay_frames

REPLAY_TOLERANCE = 1e-6
"""The largest gap between a replayed and a recorded trajectory state a video may show."""


def render_pair_videos(pairs: pd.DataFrame, rollouts: pd.DataFrame, suite: str,
                       directory: str | os.PathLike, max_pairs: int | None = None,
                       frames: int = 24, fps: int = 8, image_size: int = 96,
                       benchmark: str = "metaworld", seed: int = 0) -> pd.DataFrame:
    """Videos only where the annotators need them: for the first ``max_pairs`` pairs
    (all when None) that lack one, replay both rollouts and write ``frames`` frames
    spread over each episode as ``<rollout_id>.mp4`` in ``directory`` (software
    rendering costs ~90 ms a frame; a file already there is reused; all replays share
    one simulator, built with ``seed``: the rollouts' own). Returns ``pairs`` with
    video_a/video_b filled."""
    out, info = pairs.copy(), rollouts.set_index("rollout_id")
    for column in ("video_a", "video_b"):
        out[column] = out[column].astype(object) if column in out else None
    adapter = None
    try:
        for k in out.index[:max_pairs]:
            for side in "ab":
                video = out.at[k, f"video_{side}"]
                if isinstance(video, str) and Path(video).exists():
                    continue
                rid = str(out.at[k, f"rollout_{side}"])
                target = Path(directory) / f"{rid.replace('/', '_')}.mp4"
                if not target.exists():  # a rollout in several pairs is rendered once
                    adapter = adapter or make_benchmark(benchmark, suite=suite, seed=seed,
                                                        image_size=image_size)
                    path = str(info.at[rid, "rollout_path"])
                    shots, gap = replay_frames(suite, out.at[k, "task"],
                                               int(out.at[k, "init_id"]), path, frames,
                                               image_size, benchmark, seed, adapter)
                    if gap > REPLAY_TOLERANCE:
                        raise RuntimeError(f"replaying {path} strayed {gap:.3g} from its recorded "
                                           "trajectory: a video would not show the judged "
                                           "rollout (was it recorded with another seed?)")
                    write_video(target, shots, fps)
                out.at[k, f"video_{side}"] = str(target)
    finally:
        if adapter is not None:
            adapter.close()
    return out
