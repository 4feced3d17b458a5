"""Automatic action replay (R2S-Eval Algorithm 1 and Table I) on MetaWorld, in kind.

R2S-Eval records action sequences on real hardware, estimates each episode's initial
object pose, and replays the actions in a calibrated simulator; when the task's own
success rule does not fire, it retries up to ``N = 8`` times with the estimated pose
perturbed by a uniform offset (+-1 cm in x and y, +-pi in yaw). Here the "real" world is
a MetaWorld environment whose dynamics differ from the nominal "simulation" in stated
ways (:class:`RealityGap`: object friction, object mass, joint damping) and whose object
pose is only known through a noisy estimate.

Both sides are a :class:`GapMetaWorldAdapter` (the MetaWorld adapter with the model
scaled once when an environment is built, and an optional object pose placed at
reset), and both run through the one step loop,
:func:`~workbench.runtime.episode.run_episode`: the scripted expert on the real side
(recorded by a :class:`~workbench.runtime.episode.RolloutRecorder`), a
:class:`~workbench.ranking.replay.ReplayPolicy` on the simulation side. Replays read
state only; nothing is rendered.

Tasks: MetaWorld tasks whose manipulated object is a free body (``qpos[9:16]``), e.g.
``push-v3``, ``pick-place-v3``, ``sweep-v3``, ``bin-picking-v3``, ``peg-insert-side-v3``.

>>> gap = RealityGap(friction_scale=0.6, mass_scale=1.5, damping_scale=2.0)
>>> gap.is_identity, RealityGap.none().is_identity
(False, True)
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd

from workbench.benchmarks import BenchmarkAdapter
from workbench.benchmarks.metaworld import NUM_INIT_STATES, MetaWorldAdapter
from workbench.contracts.capabilities import LoadContext
from workbench.contracts.plan import EpisodeSpec
from workbench.policies.scripted import ScriptedExpert
from workbench.ranking.replay import ReplayPolicy
from workbench.records.rollout import Rollout
from workbench.runtime.episode import EpisodeObserver, RolloutRecorder, run_episode

OBJECT_QPOS = 9  # MetaWorld puts the manipulated object's free joint right after the arm
MAX_TILT = 1e-3  # |quaternion x|, |y| above this: the object is not upright at reset
TABLE_COLUMNS = ("task", "trajectories", "real_success_rate", "replay_first_attempt",
                 "replay_within_n", "mean_attempts")


def _require_finite(owner: Any, names: Sequence[str], positive: bool) -> None:
    """Refuse, naming the field, any of ``owner``'s ``names`` that is not a finite
    number > 0 (``positive``) or >= 0."""
    bound = "> 0" if positive else ">= 0"
    for name in names:
        value = getattr(owner, name)
        if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
            raise ValueError(f"{name} must be a finite number {bound}, got {value}")


@dataclass(frozen=True)
class RealityGap:
    """How the "real" world differs from the nominal simulation.

    friction_scale multiplies the sliding friction of the object's geoms, mass_scale the
    mass and inertia of the object's bodies, damping_scale the damping of every joint
    (the arm's 10, the fingers' 1000). pose_noise_m and pose_noise_rad are the standard
    deviations of the Gaussian error of the initial object pose estimate (x and y in
    metres, yaw in radians).

    >>> RealityGap(mass_scale=0.0)
    Traceback (most recent call last):
    ...
    ValueError: mass_scale must be a finite number > 0, got 0.0
    """

    friction_scale: float = 0.6
    mass_scale: float = 1.5
    damping_scale: float = 2.0
    pose_noise_m: float = 0.01
    pose_noise_rad: float = 0.1

    def __post_init__(self) -> None:
        _require_finite(self, ("friction_scale", "mass_scale", "damping_scale"), positive=True)
        _require_finite(self, ("pose_noise_m", "pose_noise_rad"), positive=False)

    @classmethod
    def none(cls) -> "RealityGap":
        """No gap: nominal dynamics and an exact pose estimate."""
        return cls(1.0, 1.0, 1.0, 0.0, 0.0)

    @property
    def is_identity(self) -> bool:
        return self == RealityGap.none()

    @property
    def dynamics_only(self) -> "RealityGap":
        """The same dynamics with an exact pose estimate."""
        return replace(self, pose_noise_m=0.0, pose_noise_rad=0.0)


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
    ValueError: n_attempts must be an integer >= 1, got 0
    """

    n_attempts: int = 8
    translation_m: float = 0.01
    yaw_rad: float = math.pi
    seed: int = 0
    replay_real_failures: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.n_attempts, bool) or int(self.n_attempts) != self.n_attempts \
                or self.n_attempts < 1:
            raise ValueError(f"n_attempts must be an integer >= 1, got {self.n_attempts}")
        _require_finite(self, ("translation_m", "yaw_rad"), positive=False)


@dataclass(frozen=True)
class ObjectPose:
    """Planar pose of the object on the table: x, y (metres), yaw (radians); z is the
    environment's own (the table height)."""

    x: float
    y: float
    yaw: float

    def offset(self, delta: Sequence[float]) -> "ObjectPose":
        """The pose moved by ``delta`` = (dx, dy, dyaw).

        >>> ObjectPose(0.1, 0.6, 0.0).offset([0.01, -0.01, 0.5])
        ObjectPose(x=0.11, y=0.59, yaw=0.5)
        """
        dx, dy, dyaw = (float(v) for v in delta)
        return ObjectPose(self.x + dx, self.y + dy, self.yaw + dyaw)

    def as_array(self) -> np.ndarray:
        return np.array([self.x, self.y, self.yaw])


# -- the model: which bodies are the object, and the gap applied to them -------------------
def object_bodies(model: Any) -> np.ndarray:
    """Body ids of the manipulated object: the body whose free joint starts at
    ``qpos[9]`` and all bodies below it. Raises ValueError when there is none.

    >>> from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    >>> object_bodies(ALL_V3_ENVIRONMENTS["push-v3"]().model).tolist()
    [33]"""
    free = [j for j in range(model.njnt)
            if model.jnt_type[j] == 0 and model.jnt_qposadr[j] == OBJECT_QPOS]
    if not free:
        raise ValueError("this MetaWorld task has no free object at qpos[9:16] "
                         "(e.g. drawers, doors, buttons are fixed); use one such as "
                         "push-v3, pick-place-v3, sweep-v3, bin-picking-v3")
    root = int(model.jnt_bodyid[free[0]])
    bodies = [root]
    for body in range(root + 1, model.nbody):
        if int(model.body_parentid[body]) in bodies:
            bodies.append(body)
    return np.array(bodies)


def object_geoms(model: Any) -> np.ndarray:
    """Geom ids of the object's bodies that collide (visual-only geoms left out)."""
    bodies = set(object_bodies(model).tolist())
    return np.array([g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in bodies
                     and (model.geom_contype[g] or model.geom_conaffinity[g])])


def scale_dynamics(model: Any, gap: RealityGap) -> None:
    """Scale ``model`` in place: object sliding friction, object mass and inertia, and
    every joint's damping, by the gap's factors; then recompute MuJoCo's derived constants."""
    import mujoco

    geoms, bodies = object_geoms(model), object_bodies(model)
    model.geom_friction[geoms, 0] *= gap.friction_scale
    model.body_mass[bodies] *= gap.mass_scale
    model.body_inertia[bodies] *= gap.mass_scale
    model.dof_damping[:] *= gap.damping_scale
    mujoco.mj_setConst(model, mujoco.MjData(model))


def yaw_invariant(model: Any, tol: float = 1e-6) -> bool:
    """Whether the object's colliding shape is unchanged by a turn about its vertical
    axis (spheres, and z-aligned cylinders or capsules centred on it): then a yaw error
    or offset cannot change a replay.

    >>> from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    >>> [yaw_invariant(ALL_V3_ENVIRONMENTS[t]().model) for t in ("push-v3", "sweep-v3")]
    [True, False]"""
    for g in object_geoms(model):
        kind, pos, quat = int(model.geom_type[g]), model.geom_pos[g], model.geom_quat[g]
        centred = abs(pos[0]) < tol and abs(pos[1]) < tol
        upright = abs(quat[1]) < tol and abs(quat[2]) < tol
        if not (kind == 2 and centred or kind in (3, 5) and centred and upright):
            return False
    return True


def read_object_pose(env: Any) -> ObjectPose:
    """The object's current planar pose in a MetaWorld environment (refuses a tilted one;
    MetaWorld's own objects start within 1e-3 of upright)."""
    qpos = env.data.qpos
    w, qx, qy, qz = qpos[OBJECT_QPOS + 3:OBJECT_QPOS + 7]
    if abs(qx) > MAX_TILT or abs(qy) > MAX_TILT:
        raise ValueError(f"the object is not upright (quaternion {[w, qx, qy, qz]})")
    return ObjectPose(float(qpos[OBJECT_QPOS]), float(qpos[OBJECT_QPOS + 1]),
                      _heading(qpos[OBJECT_QPOS + 3:OBJECT_QPOS + 7]))


def _heading(quat: np.ndarray) -> float:
    w, x, y, z = (float(v) for v in quat)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def place_object(env: Any, pose: ObjectPose) -> np.ndarray:
    """Put the object at ``pose`` (at rest; z and the reset's tiny tilt unchanged: the
    current orientation is turned about the vertical by the yaw difference), as
    MetaWorld's own reset would, and return the fresh 39-D observation (both frame-stack
    halves the current state). Placing the pose just read changes nothing."""
    import mujoco

    qpos, qvel = env.data.qpos.copy(), env.data.qvel.copy()
    quat = qpos[OBJECT_QPOS + 3:OBJECT_QPOS + 7].copy()
    turn = pose.yaw - _heading(quat)
    if turn != 0.0:
        mujoco.mju_mulQuat(quat, np.array([math.cos(turn / 2), 0.0, 0.0, math.sin(turn / 2)]),
                           quat.copy())
    qpos[OBJECT_QPOS:OBJECT_QPOS + 2] = pose.x, pose.y
    qpos[OBJECT_QPOS + 3:OBJECT_QPOS + 7] = quat
    qvel[OBJECT_QPOS:OBJECT_QPOS + 6] = 0.0
    warmstart = env.data.qacc_warmstart.copy()  # the solver's start, as the reset left it
    env.set_state(qpos, qvel)
    env.data.qacc_warmstart[:] = warmstart
    if hasattr(env, "obj_init_pos"):
        env.obj_init_pos = qpos[OBJECT_QPOS:OBJECT_QPOS + 3].copy()
    current = env._get_curr_obs_combined_no_goal()
    env._prev_obs = current.copy()
    return env._get_obs()


class GapMetaWorldAdapter(MetaWorldAdapter):
    """The MetaWorld adapter with a :class:`RealityGap`'s dynamics applied to each
    environment when it is built, and ``object_pose`` (when set) placed after every reset.

    Only the gap's scale factors act here; its pose noise is the estimator's
    (:func:`estimate_pose`). ``RealityGap.none()`` gives the nominal simulation.
    """

    def __init__(self, suite: str, gap: RealityGap | None = None, seed: int = 0) -> None:
        super().__init__(suite, seed=seed, image_size=64)
        self.gap = RealityGap.none() if gap is None else gap
        self.object_pose: ObjectPose | None = None

    def reset(self, episode: EpisodeSpec) -> None:
        super().reset(episode)
        if self.object_pose is not None:
            self._obs = place_object(self._env, self.object_pose)

    def environment(self, task: str) -> Any:
        """The (gap-scaled) MetaWorld environment of ``task``, built on first use."""
        return self._environment(task)

    def _environment(self, task: str) -> Any:
        built = task in self._envs
        env = super()._environment(task)
        if not built and not self.gap.is_identity:
            scale_dynamics(env.model, self.gap)
        return env


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
        raise ValueError(f"trajectories must be in [1, {NUM_INIT_STATES}], got {trajectories}")
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
        round_object = _yaw_invariant_task(task)
        for traj, outcome in zip(real, outcomes):
            err = traj.estimated_pose.as_array() - traj.true_pose.as_array()
            rows.append(outcome.row() | {
                "steps": traj.rollout.steps, "true_pose": traj.true_pose.as_array().tolist(),
                "estimated_pose": traj.estimated_pose.as_array().tolist(),
                "position_error_m": float(np.hypot(err[0], err[1])),
                "yaw_error_rad": float(abs(err[2])), "yaw_invariant": round_object})
    return pd.DataFrame(rows)


def _yaw_invariant_task(task: str) -> bool:
    adapter = GapMetaWorldAdapter(f"MT1:{task}")
    try:
        return yaw_invariant(adapter.environment(task).model)
    finally:
        adapter.close()


# -- Table I ---------------------------------------------------------------------------------
def table_one(rows: pd.DataFrame) -> pd.DataFrame:
    """Table I in kind, one row per task plus ``Total / Avg.``: trajectories, real success
    rate, replay success on the first attempt and within N attempts, and mean attempts
    used, the last three over the trajectories replayed (``attempts > 0``; NaN if none).

    >>> rows = pd.DataFrame({"task": ["a", "a"], "real_success": [True, True],
    ...                      "first_attempt": [True, False], "within_n": [True, True],
    ...                      "attempts": [1, 3]})
    >>> table_one(rows).loc[0, ["replay_within_n", "mean_attempts"]].tolist()
    [1.0, 2.0]
    """
    per_task = [_table_row(str(task), group) for task, group in rows.groupby("task", sort=False)]
    return pd.DataFrame(per_task + [_table_row("Total / Avg.", rows)], columns=list(TABLE_COLUMNS))


def _table_row(task: str, rows: pd.DataFrame) -> dict[str, Any]:
    replayed = rows[rows["attempts"] > 0]
    return {"task": task, "trajectories": len(rows),
            "real_success_rate": float(rows["real_success"].mean()),
            "replay_first_attempt": float(replayed["first_attempt"].mean()),
            "replay_within_n": float(replayed["within_n"].mean()),
            "mean_attempts": float(replayed["attempts"].mean())}


def plot_table_one(table: pd.DataFrame, ax: Any = None) -> tuple[Any, Any]:
    """Heat map of Table I's rates (percent) per task, each cell annotated.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> t = pd.DataFrame([["a", 2, 1.0, 0.5, 1.0, 2.0]], columns=list(TABLE_COLUMNS))
    >>> fig, ax = plot_table_one(t)
    >>> len(ax.texts)
    3
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    rates = table.set_index("task")[["real_success_rate", "replay_first_attempt",
                                     "replay_within_n"]] * 100
    rates.columns = ["real success", "replay: first attempt", "replay: within N"]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 0.5 * len(rates) + 1.6))
    sns.heatmap(rates, annot=True, fmt=".1f", vmin=0, vmax=100, cmap="viridis",
                cbar_kws={"label": "% (replay columns: of the replayed real successes)"}, ax=ax)
    ax.set_ylabel("")
    ax.set_title("Automatic action replay (Table I in kind)")
    return ax.figure, ax
