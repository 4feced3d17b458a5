"""Canonical states from a robosuite observation dict (LIBERO and robosuite share them).

>>> obs = {"robot0_eef_pos": np.zeros(3), "robot0_eef_quat": np.array([0, 0, 0, 1.0]),
...        "robot0_gripper_qpos": np.zeros(2), "robot0_joint_pos": np.zeros(7)}
>>> state16(obs).shape, eef8(obs).shape
((16,), (8,))
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def axis_angle(quat: np.ndarray) -> np.ndarray:
    """Axis-angle of an (x, y, z, w) quaternion, as LeRobot's and openpi's clients do."""
    w = float(np.clip(quat[3], -1.0, 1.0))
    den = np.sqrt(1.0 - w * w)
    return np.zeros(3) if den < 1e-9 else quat[:3] * 2.0 * np.arccos(w) / den


def state16(obs: Mapping[str, Any]) -> np.ndarray:
    """End-effector position 3 and quaternion 4, gripper joints 2, arm joints 7."""
    return np.concatenate([obs["robot0_eef_pos"], obs["robot0_eef_quat"],
                           obs["robot0_gripper_qpos"], obs["robot0_joint_pos"]]
                          ).astype(np.float32)


def controller8(robot: Any, obs: Mapping[str, Any]) -> np.ndarray:
    """vla-eval's ``controller_states``: the OSC controller's end-effector position 3,
    the axis-angle of its orientation matrix 3, the gripper joints 2 (the observation's).
    robosuite 1.5 names the controller's pose ``ref_pos``/``ref_ori_mat`` on the arm's
    part controller; earlier releases ``ee_pos``/``ee_ori_mat`` on ``robot.controller``."""
    from scipy.spatial.transform import Rotation

    controller = getattr(robot, "controller", None) or robot.part_controllers[robot.arms[0]]
    position = getattr(controller, "ee_pos", None)
    orientation = getattr(controller, "ee_ori_mat", None)
    if position is None or orientation is None:
        position, orientation = controller.ref_pos, controller.ref_ori_mat
    quat = Rotation.from_matrix(np.asarray(orientation, np.float64)).as_quat(canonical=True)
    return np.concatenate([np.asarray(position, np.float64), axis_angle(quat),
                           obs["robot0_gripper_qpos"]]).astype(np.float32)


def eef8(obs: Mapping[str, Any]) -> np.ndarray:
    """LeRobot/openpi's state: end-effector position 3, axis-angle 3, gripper joints 2."""
    return np.concatenate([obs["robot0_eef_pos"], axis_angle(obs["robot0_eef_quat"]),
                           obs["robot0_gripper_qpos"]]).astype(np.float32)
