"""Frames of a recorded rollout without its video, by replaying its actions.

The recorded actions run again from the episode's initial state through the
runtime's step loop (:func:`~workbench.runtime.episode.run_episode`), played by a
:class:`ReplayPolicy`; a :class:`FrameGrabber` renders only the frames a figure needs
and measures how far the replay strays from the recorded trajectory state (0 when the
simulator is deterministic, so the frames show exactly the judged rollout).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from workbench.benchmarks import BenchmarkAdapter, make_benchmark
from workbench.benchmarks.base import StepResult
from workbench.contracts.capabilities import Capabilities, LoadContext, Observation
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.results import EpisodeResult
from workbench.policies.base import Policy
from workbench.records.rollout import Rollout, load_rollout
from workbench.runtime.episode import EpisodeObserver, run_episode, video_feature


class ReplayPolicy(Policy):
    """Plays back a recorded rollout's actions as one chunk; reads nothing."""

    name = "replay"

    def __init__(self, rollout: Rollout, protocol: str) -> None:
        super().__init__()
        self.actions = np.ascontiguousarray(rollout.actions, np.float32)
        self._caps = Capabilities(protocol, (), chunk_size=len(self.actions))

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        return self.actions


@dataclass
class FrameGrabber(EpisodeObserver):
    """Renders ``feature`` at the steps in ``wanted`` (step T: the state after the last
    action) and tracks the largest gap to the recorded trajectory states."""

    feature: str
    wanted: set[int]
    recorded: NDArray[np.float32]
    frames: list[NDArray[np.uint8]] = field(default_factory=list)
    gap: float = 0.0
    last: int = 0

    def _visit(self, adapter: BenchmarkAdapter, t: int) -> None:
        if t < len(self.recorded):
            self.gap = max(self.gap, float(np.abs(adapter.trajectory_state()
                                                  - self.recorded[t]).max()))
        if t in self.wanted:
            self.frames.append(adapter.render(self.feature))

    def before_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray) -> None:
        self._visit(adapter, step)

    def after_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray,
                   result: StepResult, seconds: float) -> None:
        self.last = step + 1

    def on_end(self, adapter: BenchmarkAdapter, spec: EpisodeSpec,
               result: EpisodeResult) -> None:
        self._visit(adapter, self.last)


def replay_frames(suite: str, task: str, init_id: int, rollout_path: str, count: int = 6,
                  image_size: int = 96, benchmark: str = "metaworld", seed: int = 0,
                  adapter: BenchmarkAdapter | None = None
                  ) -> tuple[list[NDArray[np.uint8]], float]:
    """``count`` frames spread over a recorded rollout (first and last included), and the
    largest gap between the replayed and the recorded trajectory state.

    A frame strip costs ``count`` renders, not one per step. adapter: an open adapter of
    ``benchmark`` and ``suite`` at ``image_size`` to replay in (kept open, so several
    replays build the simulator once); without one, one is made and closed.
    """
    rollout = load_rollout(rollout_path)
    wanted = set(np.linspace(0, rollout.steps, count).round().astype(int).tolist())
    own = adapter is None
    if own:
        adapter = make_benchmark(benchmark, suite=suite, seed=seed, image_size=image_size)
    try:
        policy = ReplayPolicy(rollout, adapter.protocol.name)
        policy.load(LoadContext(adapter.protocol.name))
        grabber = FrameGrabber(video_feature(adapter), wanted, rollout.state)
        result = run_episode(adapter, policy, EpisodeSpec(benchmark, suite, task, int(init_id),
                                                          int(init_id)),
                             observe_every_step=False, observers=[grabber])
    finally:
        if own:
            adapter.close()
    if result.error_kind is not None:
        raise RuntimeError(f"replaying {rollout_path} failed: {result.error_message}")
    if result.steps != rollout.steps:
        grabber.gap = max(grabber.gap, float("inf"))
    return grabber.frames, grabber.gap
