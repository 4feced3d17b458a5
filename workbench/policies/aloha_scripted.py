"""Scripted ALOHA demonstrations planned in end-effector space, replayed as joint targets.

ACT's recipe for its simulated tasks (Zhao et al. 2023, ``record_sim_episodes.py``),
done in-process for one episode at a time: at the episode's first step the policy
reads the object poses (privileged), drives gym-aloha's end-effector twin of the task
(the same arms and objects, each gripper welded to a motion-capture body) through
time-stamped waypoints for each hand, records the arm joints it reaches and the
gripper openings it commands, and then replays that ``(steps + 1, 14)`` trajectory as
absolute joint targets through the benchmark, which scores it. The waypoints follow
ACT's scripted policies: for TransferCube the right hand descends on the cube, grasps,
lifts it to a meeting point where the left hand, turned 90 degrees, closes on it; for
Insertion each hand picks its object and the two meet, peg into socket.

ACT's scripts are reported broken on MuJoCo 3 (tonyzhaozh/act#45), which computes weld
constraints differently from MuJoCo 2 (google-deepmind/mujoco#1483): gym-aloha's soft
hand welds (solimp 0.25) no longer pull the arms after their motion-capture bodies.
Measured here on TransferCube episodes 0-9 with MuJoCo 3.3.0: the right gripper lags
its target by 1.7 cm on average (up to 10 cm) and 2 of 10 replays succeed; with the
planner's welds stiffened (:data:`WELD_SOLIMP`) the lag is 0.2 cm and 10 of 10 succeed.
Only the planner's own end-effector model is changed; the benchmark's joint-space
environment is untouched.

Measured over 50 episodes each: TransferCube 50 of 50 (success at step 215, when the
left fingers first touch the lifted cube), Insertion 48 of 50. Results are diagnostics
of the adapter's success bookkeeping on real simulation, not capability scores.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from workbench.contracts.capabilities import Capabilities, EpisodeContext, Observation
from workbench.policies.base import Policy

PLAN_STEPS = 400
"""Steps of an ACT scripted episode."""
WELD_SOLIMP = (0.95, 0.99, 0.001)
"""Impedance of the planner's hand welds (gym-aloha's XML says 0.25, 0.25, 0.001)."""
ARM_QPOS = 16
"""qpos entries of the two arms (6 joints and 2 fingers each); the objects follow."""
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])

Waypoints = list[tuple[float, Any, Any, float]]
"""(step, xyz, quaternion wxyz, gripper opening in [0, 1]) of one hand, by step."""


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of two wxyz quaternions.

    >>> quat_multiply(IDENTITY, np.array([0.0, 1.0, 0.0, 0.0])).tolist()
    [0.0, 1.0, 0.0, 0.0]
    """
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                     w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def quat_about(axis: tuple[float, float, float], degrees: float) -> np.ndarray:
    """The wxyz quaternion of a rotation by ``degrees`` about a unit ``axis``."""
    half = np.deg2rad(degrees) / 2
    return np.concatenate([[np.cos(half)], np.sin(half) * np.asarray(axis, np.float64)])


def hand_command(waypoints: Waypoints, step: float) -> np.ndarray:
    """The hand's ``(8,)`` command at ``step``: xyz, quaternion (normalised) and gripper,
    linearly interpolated between the waypoints around it.

    >>> hand_command([(0, [0, 0, 0], IDENTITY, 0.0), (10, [1, 0, 0], IDENTITY, 1.0)], 5)
    array([0.5, 0. , 0. , 1. , 0. , 0. , 0. , 0.5])
    """
    times = np.array([w[0] for w in waypoints], np.float64)
    table = np.array([np.concatenate([w[1], w[2], [w[3]]]) for w in waypoints], np.float64)
    command = np.array([np.interp(step, times, column) for column in table.T])
    command[3:7] /= np.linalg.norm(command[3:7])
    return command


def transfer_cube_waypoints(objects: np.ndarray, left: np.ndarray,
                            right: np.ndarray) -> tuple[Waypoints, Waypoints]:
    """Left and right hand waypoints for TransferCube (ACT's pick-and-transfer script).

    objects: the cube's pose (7,); left, right: each hand's start pose (7,), xyz + wxyz.
    """
    cube, meet = objects[:3], np.array([0.0, 0.5, 0.25])
    pick = quat_multiply(right[3:], quat_about((0, 1, 0), -60))
    receive = quat_about((1, 0, 0), 90)
    hold = meet + [0.02, 0, -0.02]
    left_hand = [(0, left[:3], left[3:], 0), (100, meet + [-0.1, 0, -0.02], receive, 1),
                 (260, hold, receive, 1), (310, hold, receive, 0),
                 (360, meet + [-0.1, 0, -0.02], IDENTITY, 0),
                 (400, meet + [-0.1, 0, -0.02], IDENTITY, 0)]
    right_hand = [(0, right[:3], right[3:], 0), (90, cube + [0, 0, 0.08], pick, 1),
                  (130, cube + [0, 0, -0.015], pick, 1), (170, cube + [0, 0, -0.015], pick, 0),
                  (200, meet + [0.05, 0, 0], pick, 0), (220, meet, pick, 0),
                  (310, meet, pick, 1), (360, meet + [0.1, 0, 0], pick, 1),
                  (400, meet + [0.1, 0, 0], pick, 1)]
    return left_hand, right_hand


def insertion_waypoints(objects: np.ndarray, left: np.ndarray,
                        right: np.ndarray) -> tuple[Waypoints, Waypoints]:
    """Left (socket) and right (peg) hand waypoints for Insertion (ACT's script).

    objects: the peg's then the socket's pose (14,); left, right as for TransferCube.
    """
    peg, socket, meet = objects[:3], objects[7:10], np.array([0.0, 0.5, 0.15])
    left_pick = quat_multiply(right[3:], quat_about((0, 1, 0), 60))
    right_pick = quat_multiply(right[3:], quat_about((0, 1, 0), -60))
    lift = np.array([0, 0, 0.00715])  # the peg held a little higher than the socket

    def hand(start: np.ndarray, target: np.ndarray, quat: np.ndarray,
             side: float, raised: np.ndarray) -> Waypoints:
        low = target + [0, 0, -0.03]
        return [(0, start[:3], start[3:], 0), (120, target + [0, 0, 0.08], quat, 1),
                (170, low, quat, 1), (220, low, quat, 0),
                (285, meet + [0.1 * side, 0, 0] + raised, quat, 0),
                (340, meet + [0.05 * side, 0, 0] + raised, quat, 0),
                (400, meet + [0.05 * side, 0, 0] + raised, quat, 0)]

    return (hand(left, socket, left_pick, -1.0, np.zeros(3)),
            hand(right, peg, right_pick, 1.0, lift))


PLANS: dict[str, tuple[str, Callable[..., tuple[Waypoints, Waypoints]]]] = {
    "AlohaTransferCube-v0": ("bimanual_viperx_end_effector_transfer_cube.xml",
                             transfer_cube_waypoints),
    "AlohaInsertion-v0": ("bimanual_viperx_end_effector_insertion.xml", insertion_waypoints),
}
"""Per task: gym-aloha's end-effector model and the waypoint script."""


class EndEffectorPlanner:
    """gym-aloha's end-effector twin of one task, stepped to turn hand waypoints into
    joint targets. Deterministic: the same object poses give the same trajectory."""

    def __init__(self, task: str) -> None:
        from dm_control import mujoco
        from gym_aloha.constants import ASSETS_DIR, DT
        from gym_aloha.tasks.sim_end_effector import BimanualViperXEndEffectorTask

        model_file, self.waypoints = PLANS[task]
        self.physics = mujoco.Physics.from_xml_path(str(ASSETS_DIR / model_file))
        self.physics.model.eq_solimp[:, :3] = WELD_SOLIMP
        self.hands = BimanualViperXEndEffectorTask()
        self.substeps = round(DT / self.physics.timestep())

    def joint_trajectory(self, objects: np.ndarray, steps: int = PLAN_STEPS) -> np.ndarray:
        """``(steps + 1, 14)`` joint-and-gripper targets; row t is the action for step t.

        objects: the episode's initial object poses (gym-aloha's ``env_state``).
        """
        physics, hands = self.physics, self.hands
        with physics.reset_context():
            hands.initialize_robots(physics)  # start pose, hands at the grippers, closed
            physics.data.qpos[ARM_QPOS:] = objects
        start = [np.concatenate([physics.data.mocap_pos[i], physics.data.mocap_quat[i]])
                 for i in (0, 1)]
        left, right = self.waypoints(np.asarray(objects, np.float64), *start)
        rows = [self._targets()]
        for step in range(steps):
            hands.before_step(np.concatenate([hand_command(left, step),
                                              hand_command(right, step)]), physics)
            physics.step(self.substeps)
            rows.append(self._targets())
        return np.array(rows)

    def _targets(self) -> np.ndarray:
        """Arm joints reached, with the commanded (not the measured) gripper openings:
        fingers stopped by an object would otherwise loosen the grasp in the replay."""
        from gym_aloha.constants import normalize_puppet_gripper_position

        targets = self.hands.get_qpos(self.physics)
        ctrl = self.physics.data.ctrl
        targets[6] = normalize_puppet_gripper_position(ctrl[0])
        targets[13] = normalize_puppet_gripper_position(ctrl[2])
        return targets


class AlohaScriptedReplay(Policy):
    """Plans the episode in end-effector space at its first step, then replays the joint
    trajectory one target per step (privileged: reads the object poses)."""

    name = "aloha-scripted"
    preload = ("dm_control", "gym_aloha", "workbench.policies.aloha_scripted")

    def __init__(self, protocol: str = "robotwin2-v1") -> None:
        super().__init__()
        self._planners: dict[str, EndEffectorPlanner] = {}

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities("robotwin2-v1", ("privileged.state",), privileged=True,
                            runtime_invariant=True)

    def _reset(self, context: EpisodeContext) -> dict[str, Any]:
        if context.task not in PLANS:
            raise ValueError(f"no scripted plan for task {context.task!r}; "
                             f"available: {sorted(PLANS)}")
        return {"task": context.task, "trajectory": None}

    def _act(self, observation: Observation, episode: dict[str, Any]) -> np.ndarray:
        if episode["trajectory"] is None:
            if episode["task"] not in self._planners:
                self._planners[episode["task"]] = EndEffectorPlanner(episode["task"])
            planner = self._planners[episode["task"]]
            episode["trajectory"] = planner.joint_trajectory(observation["privileged.state"])
        trajectory = episode["trajectory"]
        return trajectory[min(observation["step"], len(trajectory) - 1)].astype(np.float32)

    def _unload(self) -> None:
        for planner in self._planners.values():
            planner.physics.free()
        self._planners.clear()
