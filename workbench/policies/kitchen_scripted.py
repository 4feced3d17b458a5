"""Scripted privileged diagnostic for Franka Kitchen (``kitchen-v1``).

:class:`KitchenLightSlide` turns on the light switch, then opens the slide cabinet (the
classic chain's last two subtasks; the ``light-slide`` chain, or either alone). It
reads privileged state, so its results are diagnostics of the adapter's chain
bookkeeping on real simulation, not capability scores.

It loads the kitchen's MuJoCo model from gymnasium-robotics' own XML, poses it at the
observed joint positions (robot and objects, from ``privileged.state``), and turns an
end-effector velocity toward the next waypoint (fixed offsets from the switch's and
the handle's sites) into joint velocities with the site Jacobian: damped least
squares, the hand's starting orientation held, a null-space pull toward the starting
arm posture. The environment's position servos lag the velocity they are asked for
(joint damping and gravity against their stiffness), so the command adds that lag,
computed from the same model: ``(gravity + damping * qdot) / (kp * dt)``.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from workbench.contracts.capabilities import Capabilities, EpisodeContext, LoadContext, Observation
from workbench.policies.base import Policy

KITCHEN_XML = "envs/assets/kitchen_franka/kitchen_assets/kitchen_env_model.xml"
"""The FrankaKitchen-v1 model, relative to the gymnasium_robotics package."""
CONTROL_DT = 0.08
"""Seconds per environment step (40 physics steps of 2 ms)."""
ACTION_SCALE = 2.0
"""Joint velocity per unit of action."""

SKILLS: dict[str, tuple[str, tuple[tuple[float, float, float], ...]]] = {
    # beside the switch's lever, then sweep it toward -x, then back off
    "light switch": ("light_site", ((0.10, -0.10, 0.0), (0.10, 0.0, 0.0), (-0.06, 0.0, 0.0),
                                    (-0.06, -0.12, 0.0))),
    # left of the handle, then push it toward +x, then back off
    "slide cabinet": ("slide_site", ((-0.12, -0.12, 0.0), (-0.10, 0.0, 0.0), (0.25, 0.0, 0.0),
                                     (0.25, -0.12, 0.0))),
}
"""Subtask -> (site, world-frame waypoint offsets from the site at the episode's start)."""

REACH_M = 0.03
"""A waypoint within this distance of the end effector is reached."""
STALL_STEPS, STALL_M = 10, 0.003
"""A waypoint is given up when the distance shrank less than STALL_M in STALL_STEPS steps
(pushing against a lever at its end stop, say)."""
GAIN, MAX_SPEED_MPS = 4.0, 0.4
"""End-effector velocity: GAIN per second times the distance, at most MAX_SPEED_MPS."""
ORIENTATION_GAIN, POSTURE_GAIN, DLS_LAMBDA = 2.0, 0.5, 0.05


class KitchenLightSlide(Policy):
    """Light switch, then slide cabinet, by Jacobian control of the end effector
    (privileged). ``subtasks`` picks which of the two, in which order."""

    name = "kitchen-light-slide"
    preload = ("mujoco", "gymnasium_robotics")

    def __init__(self, protocol: str = "kitchen-v1",
                 subtasks: Sequence[str] = ("light switch", "slide cabinet")) -> None:
        super().__init__()
        unknown = [s for s in subtasks if s not in SKILLS]
        if unknown or not subtasks:
            raise ValueError(f"subtasks {list(subtasks)}: this script knows {sorted(SKILLS)}")
        self.subtasks = tuple(subtasks)
        self._model: Any = None
        self._data: Any = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities("kitchen-v1", ("privileged.state",), privileged=True,
                            runtime_invariant=True)

    def _load(self, context: LoadContext) -> None:
        import mujoco
        import gymnasium_robotics

        root = os.path.dirname(gymnasium_robotics.__file__)
        self._model = mujoco.MjModel.from_xml_path(os.path.join(root, KITCHEN_XML))
        self._data = mujoco.MjData(self._model)

    def _reset(self, context: EpisodeContext) -> dict[str, Any]:
        return {"waypoints": None, "next": 0, "since": 0, "checkpoint": np.inf,
                "posture": None, "orientation": None}

    def _act(self, observation: Observation, episode: dict[str, Any]) -> np.ndarray:
        obs = observation["privileged.state"].astype(np.float64)
        eef, rotation = self._pose(obs)
        if episode["waypoints"] is None:
            episode.update(waypoints=self._waypoints(), posture=obs[:7].copy(),
                           orientation=rotation.copy())
        target = self._advance(episode, eef)
        action = np.full(9, -1.0, np.float32)  # closed fingers push
        action[:7] = self._joint_command(target - eef, rotation, obs, episode)
        return action

    def _pose(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pose the model at the observed joints; the end effector's position and rotation."""
        import mujoco

        model, data = self._model, self._data
        data.qpos[:9], data.qpos[9:] = obs[:9], obs[18:18 + model.nq - 9]
        data.qvel[:] = 0.0
        mujoco.mj_forward(model, data)  # kinematics, Jacobians and gravity (qfrc_bias)
        site = data.site("end_effector")
        return site.xpos.copy(), site.xmat.reshape(3, 3).copy()

    def _waypoints(self) -> list[np.ndarray]:
        points = []
        for subtask in self.subtasks:
            site, offsets = SKILLS[subtask]
            origin = self._data.site(site).xpos.copy()
            points += [origin + np.asarray(offset) for offset in offsets]
        return points

    def _advance(self, episode: dict[str, Any], eef: np.ndarray) -> np.ndarray:
        """The waypoint to steer to now, moving on when reached or stalled."""
        points = episode["waypoints"]
        distance = float(np.linalg.norm(points[episode["next"]] - eef))
        episode["since"] += 1
        stalled = False
        if episode["since"] % STALL_STEPS == 0:
            stalled = episode["checkpoint"] - distance < STALL_M
            episode["checkpoint"] = distance
        if (distance < REACH_M or stalled) and episode["next"] < len(points) - 1:
            episode.update(next=episode["next"] + 1, since=0, checkpoint=np.inf)
        return points[episode["next"]]

    def _joint_command(self, error: np.ndarray, rotation: np.ndarray, obs: np.ndarray,
                       episode: dict[str, Any]) -> np.ndarray:
        """(7,) arm action: the joint velocity that moves the end effector along ``error``
        and keeps its starting orientation, plus the servos' lag, scaled to [-1, 1]."""
        import mujoco

        model, data = self._model, self._data
        speed = GAIN * np.linalg.norm(error)
        velocity = GAIN * error * min(1.0, MAX_SPEED_MPS / max(speed, 1e-9))
        turn = np.zeros(4)
        mujoco.mju_mat2Quat(turn, (episode["orientation"] @ rotation.T).ravel())
        spin = np.zeros(3)
        mujoco.mju_quat2Vel(spin, turn, 1.0)
        jac_pos, jac_rot = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jacSite(model, data, jac_pos, jac_rot, data.site("end_effector").id)
        jac = np.vstack([jac_pos[:, :7], jac_rot[:, :7]])
        twist = np.r_[velocity, ORIENTATION_GAIN * spin]
        qdot = jac.T @ np.linalg.solve(jac @ jac.T + DLS_LAMBDA ** 2 * np.eye(6), twist)
        null = np.eye(7) - np.linalg.pinv(jac) @ jac
        qdot = np.clip(qdot + null @ (POSTURE_GAIN * (episode["posture"] - obs[:7])), -1, 1)
        lag = (data.qfrc_bias[:7] + model.dof_damping[:7] * qdot) / \
            (model.actuator_gainprm[:7, 0] * CONTROL_DT)
        return np.clip((qdot + lag) / ACTION_SCALE, -1.0, 1.0)
