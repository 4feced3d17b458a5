"""Automatic action replay (R2S-Eval Algorithm 1 and Table I) on MetaWorld, in kind.

R2S-Eval records action sequences on real hardware, estimates each episode's initial
object pose, and replays the actions in a calibrated simulator; when the task's own
success rule does not fire, it retries up to ``N = 8`` times with the estimated pose
perturbed by a uniform offset (+-1 cm in x and y, +-pi in yaw). Here the "real" world is
a MetaWorld environment whose dynamics differ from the nominal "simulation" in stated
ways (:class:`~workbench.studies.reality_gap.RealityGap`: object friction, object mass,
joint damping) and whose object pose is only known through a noisy estimate.

Both sides are a :class:`~workbench.studies.reality_gap.GapMetaWorldAdapter` (the
MetaWorld adapter with the model scaled once when an environment is built, and an
optional object pose placed at reset; :mod:`workbench.studies.reality_gap`), and both
run through the one step loop, :func:`~workbench.runtime.episode.run_episode`: the
scripted expert on the real side (recorded by a
:class:`~workbench.runtime.episode.RolloutRecorder`), a
:class:`~workbench.studies.frame_replay.ReplayPolicy` on the simulation side. Replays
read state only; nothing is rendered.

Table I of these rows is :mod:`workbench.studies.action_replay_table`.

>>> ReplayConfig().n_attempts
8
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from workbench.benchmarks import BenchmarkAdapter
from workbench.benchmarks.metaworld import NUM_INIT_STATES
from workbench.contracts.capabilities import LoadContext
from workbench.contracts.plan import EpisodeSpec
from workbench.policies.scripted import ScriptedExpert
from workbench.records.rollout import Rollout
from workbench.runtime.episode import EpisodeObserver, RolloutRecorder, run_episode
from workbench.studies.frame_replay import ReplayPolicy
from workbench.studies.reality_gap import (
    GapMetaWorldAdapter,
    ObjectPose,
    RealityGap,
    read_object_pose,
    require_finite,
    yaw_invariant_task,
)


@dataclass(frozen=True)
class ReplayConfig:
    """Algorithm 1's retry loop: ``n_attempts`` in all (the first at the estimate), each
    retry offset uniformly by up to ``translation_m`` in x and y and ``yaw_rad`` in yaw.
    replay_real_failures: also replay trajectories whose real run failed (the paper
    replays successful demonstrations; searching poses until a real failure "succeeds"
    in simulation measures nothing, so by default they are left out, with 0 attempts).

    >>> ReplayConfig(n_attempts=0)
    Traceback (most recent call last):
    ...
    ValueError: n_attempts: expected an integer >= 1; got 0
    """

    n_attempts: int = 8
    translation_m: float = 0.01
    yaw_rad: float = math.pi
    seed: int = 0
    replay_real_failures: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.n_attempts, bool) or int(self.n_attempts) != self.n_attempts \
                or self.n_attempts < 1:
            raise ValueError(f"n_attempts: expected an integer >= 1; got {self.n_attempts}")
        require_finite(self, ("translation_m", "yaw_rad"), positive=False)


# -- the real side: recorded actions, true and estimated initial poses ----------------------
@dataclass(frozen=True)
class RealTrajectory:
    """One "real" episode: the expert's actions, the true and estimated initial object
    poses, and whether the real run met the task's success rule."""

    task: str
    init_id: int
    rollout: Rollout
    true_pose: ObjectPose
    estimated_pose: ObjectPose
    real_success: bool


def trajectory_rng(seed: int, stream: str, task: str, init_id: int) -> np.random.Generator:
    """A generator for one trajectory and purpose, independent of the order they run in.

    >>> a, b = trajectory_rng(0, "pose", "push-v3", 1), trajectory_rng(0, "pose", "push-v3", 1)
    >>> a.random() == b.random() != trajectory_rng(0, "retry", "push-v3", 1).random()
    True"""
    words = [zlib.crc32(s.encode()) for s in (stream, task)]
    return np.random.default_rng([int(seed), *words, int(init_id)])


def estimate_pose(true_pose: ObjectPose, gap: RealityGap,
                  rng: np.random.Generator) -> ObjectPose:
    """The true pose plus Gaussian errors of the gap's standard deviations.

    >>> p = ObjectPose(0.0, 0.6, 0.0)
    >>> estimate_pose(p, RealityGap.none(), np.random.default_rng(0)) == p
    True
    """
    noise = rng.normal(0.0, 1.0, 3) * [gap.pose_noise_m, gap.pose_noise_m, gap.pose_noise_rad]
    return true_pose.offset(noise)


def record_real(task: str, trajectories: int, gap: RealityGap, seed: int = 0,
                adapter: GapMetaWorldAdapter | None = None) -> list[RealTrajectory]:
    """Run the scripted expert in the "real" environment on initial states
    ``0 .. trajectories-1`` of ``task`` (through run_episode) and keep its actions, the
    true initial object pose and a noisy estimate of it (seeded per trajectory)."""
    if not 1 <= trajectories <= NUM_INIT_STATES:
        raise ValueError(f"trajectories: expected in [1, {NUM_INIT_STATES}]; got {trajectories}")
    real = adapter or GapMetaWorldAdapter(f"MT1:{task}", gap, seed=seed)
    expert = ScriptedExpert()
    expert.load(LoadContext(real.protocol.name))
    out = []
    try:
        for init_id in range(trajectories):
            recorder, poses = RolloutRecorder(), InitialPoseReader()
            spec = EpisodeSpec("metaworld", real.suite, task, init_id, init_id)
            result = run_episode(real, expert, spec, observe_every_step=False,
                                 observers=[recorder, poses])
            if result.error_kind is not None or poses.pose is None:
                raise RuntimeError(f"real run of {task} #{init_id} failed: "
                                   f"{result.error_message}")
            estimate = estimate_pose(poses.pose, gap, trajectory_rng(seed, "pose", task, init_id))
            out.append(RealTrajectory(task, init_id, recorder.rollout(), poses.pose, estimate,
                                      bool(result.success)))
    finally:
        if adapter is None:
            real.close()
    return out


@dataclass
class InitialPoseReader(EpisodeObserver):
    """Reads the object's pose right after the reset (before any step)."""

    pose: ObjectPose | None = None

    def on_reset(self, adapter: BenchmarkAdapter, spec: EpisodeSpec, seconds: float) -> None:
        self.pose = read_object_pose(adapter.environment(spec.task))


# -- Algorithm 1 -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayOutcome:
    """Algorithm 1's result for one trajectory. offsets: (attempts, 3) array of the
    (dx, dy, dyaw) added to the estimate at each attempt made (row 0 is zeros)."""

    task: str
    init_id: int
    real_success: bool
    first_attempt: bool
    within_n: bool
    attempts: int
    offsets: np.ndarray = field(repr=False)

    def row(self) -> dict[str, Any]:
        return {"task": self.task, "init_id": self.init_id, "real_success": self.real_success,
                "first_attempt": self.first_attempt, "within_n": self.within_n,
                "attempts": self.attempts, "offsets": self.offsets.round(6).tolist()}


def replay_offsets(config: ReplayConfig, rng: np.random.Generator) -> np.ndarray:
    """(n_attempts, 3) offsets: zeros for the first attempt, then uniform draws in
    [-translation_m, translation_m]^2 x [-yaw_rad, yaw_rad].

    >>> replay_offsets(ReplayConfig(n_attempts=3), np.random.default_rng(0)).shape
    (3, 3)
    """
    bound = np.array([config.translation_m, config.translation_m, config.yaw_rad])
    draws = rng.uniform(-1.0, 1.0, (config.n_attempts - 1, 3)) * bound
    return np.vstack([np.zeros((1, 3)), draws])


def replay_attempt(sim: GapMetaWorldAdapter, trajectory: RealTrajectory,
                   pose: ObjectPose) -> bool:
    """One replay of the recorded actions with the object at ``pose``: whether the task's
    success flag fired within the recorded number of steps."""
    policy = ReplayPolicy(trajectory.rollout, sim.protocol.name)
    policy.load(LoadContext(sim.protocol.name))
    sim.object_pose = pose
    spec = EpisodeSpec("metaworld", sim.suite, trajectory.task, trajectory.init_id,
                       trajectory.init_id)
    try:
        result = run_episode(sim, policy, spec, observe_every_step=False,
                             max_steps=trajectory.rollout.steps)
    finally:
        sim.object_pose = None
    if result.error_kind is not None:
        raise RuntimeError(f"replay of {trajectory.task} #{trajectory.init_id} failed: "
                           f"{result.error_message}")
    return bool(result.success)


def automatic_replay(sim: GapMetaWorldAdapter, trajectory: RealTrajectory,
                     config: ReplayConfig) -> ReplayOutcome:
    """Algorithm 1: replay at the estimated pose; after each failure retry with the next
    seeded offset, up to ``n_attempts`` in all, stopping at the first success. A real
    failure is not replayed (0 attempts) unless ``config.replay_real_failures``.

    >>> real = record_real("push-v3", 1, RealityGap.none())
    >>> sim = GapMetaWorldAdapter("MT1:push-v3")
    >>> outcome = automatic_replay(sim, real[0], ReplayConfig())
    >>> real[0].real_success, outcome.first_attempt, outcome.attempts
    (True, True, 1)
    >>> sim.close()"""
    if not (trajectory.real_success or config.replay_real_failures):
        return ReplayOutcome(trajectory.task, trajectory.init_id, False, False, False, 0,
                             np.zeros((0, 3)))
    rng = trajectory_rng(config.seed, "retry", trajectory.task, trajectory.init_id)
    offsets = replay_offsets(config, rng)
    for attempt, delta in enumerate(offsets, start=1):
        if replay_attempt(sim, trajectory, trajectory.estimated_pose.offset(delta)):
            return ReplayOutcome(trajectory.task, trajectory.init_id, trajectory.real_success,
                                 attempt == 1, True, attempt, offsets[:attempt])
    return ReplayOutcome(trajectory.task, trajectory.init_id, trajectory.real_success, False,
                         False, len(offsets), offsets)


def replay_task(task: str, trajectories: int, gap: RealityGap, config: ReplayConfig
                ) -> tuple[list[RealTrajectory], list[ReplayOutcome]]:
    """Record ``trajectories`` real episodes of ``task`` and replay each by Algorithm 1 in
    the nominal simulation."""
    real = record_real(task, trajectories, gap, seed=config.seed)
    sim = GapMetaWorldAdapter(f"MT1:{task}", RealityGap.none(), seed=config.seed)
    try:
        return real, [automatic_replay(sim, t, config) for t in real]
    finally:
        sim.close()


def action_replay_rows(tasks: Sequence[str], trajectories: int, gap: RealityGap,
                       config: ReplayConfig) -> pd.DataFrame:
    """Per trajectory (one row each): task, init_id, real_success, first_attempt,
    within_n, attempts, offsets, the true and estimated poses (x, y, yaw) and the pose
    error of the estimate (metres, radians), and whether the object is yaw-invariant."""
    rows = []
    for task in tasks:
        real, outcomes = replay_task(task, trajectories, gap, config)
        round_object = yaw_invariant_task(task)
        for traj, outcome in zip(real, outcomes):
            err = traj.estimated_pose.as_array() - traj.true_pose.as_array()
            rows.append(outcome.row() | {
                "steps": traj.rollout.steps, "true_pose": traj.true_pose.as_array().tolist(),
                "estimated_pose": traj.estimated_pose.as_array().tolist(),
                "position_error_m": float(np.hypot(err[0], err[1])),
                "yaw_error_rad": float(abs(err[2])), "yaw_invariant": round_object})
    return pd.DataFrame(rows)
