"""The "real" world of the action-replay study: MetaWorld with a stated reality gap.

:class:`RealityGap` says how the "real" world differs from the nominal simulation
(object friction, object mass, joint damping, and the noise of the initial object pose
estimate); :class:`GapMetaWorldAdapter` is the MetaWorld adapter with the gap's
dynamics applied to each environment when it is built (MuJoCo model surgery on the
manipulated object's bodies and geoms) and an object pose placed at reset. The study
itself is :mod:`workbench.studies.action_replay`, its table
:mod:`workbench.studies.action_replay_table`.

Tasks: MetaWorld tasks whose manipulated object is a free body (``qpos[9:16]``), e.g.
``push-v3``, ``pick-place-v3``, ``sweep-v3``, ``bin-picking-v3``, ``peg-insert-side-v3``.

>>> gap = RealityGap(friction_scale=0.6, mass_scale=1.5, damping_scale=2.0)
>>> gap.is_identity, RealityGap.none().is_identity
(False, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from workbench.benchmarks.metaworld import MetaWorldAdapter
from workbench.contracts.plan import EpisodeSpec

OBJECT_QPOS = 9  # MetaWorld puts the manipulated object's free joint right after the arm
MAX_TILT = 1e-3  # |quaternion x|, |y| above this: the object is not upright at reset


def require_finite(owner: Any, names: Sequence[str], positive: bool) -> None:
    """Refuse, naming the field, any of ``owner``'s ``names`` that is not a finite
    number > 0 (``positive``) or >= 0."""
    bound = "> 0" if positive else ">= 0"
    for name in names:
        value = getattr(owner, name)
        if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
            raise ValueError(f"{name}: expected a finite number {bound}; got {value}")


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
    ValueError: mass_scale: expected a finite number > 0; got 0.0
    """

    friction_scale: float = 0.6
    mass_scale: float = 1.5
    damping_scale: float = 2.0
    pose_noise_m: float = 0.01
    pose_noise_rad: float = 0.1

    def __post_init__(self) -> None:
        require_finite(self, ("friction_scale", "mass_scale", "damping_scale"), positive=True)
        require_finite(self, ("pose_noise_m", "pose_noise_rad"), positive=False)

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


def yaw_invariant_task(task: str) -> bool:
    """Whether ``task``'s object is yaw-invariant (:func:`yaw_invariant`)."""
    adapter = GapMetaWorldAdapter(f"MT1:{task}")
    try:
        return yaw_invariant(adapter.environment(task).model)
    finally:
        adapter.close()
