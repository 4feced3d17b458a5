"""Scripted diagnostics for the OSC pose benchmarks (LIBERO, robosuite).

Each reads privileged state (object or region positions), so its results are
diagnostics of an adapter's success bookkeeping on real simulation, not capability
scores: :class:`LiberoDrawerCloser` (LIBERO-90's "close the top drawer of the
cabinet") and :class:`RobosuiteLifter` (robosuite's Lift). Both steer the end effector
to waypoints with proportional end-effector deltas.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.contracts.capabilities import Capabilities, EpisodeContext, Observation
from workbench.policies.base import Policy

MAX_DELTA_M = 0.05
"""robosuite's OSC pose controller moves at most this far per unit of action."""


def _toward(target: np.ndarray, eef: np.ndarray, gripper: float) -> np.ndarray:
    action = np.zeros(7, np.float32)
    action[:3] = np.clip((target - eef) / MAX_DELTA_M, -1.0, 1.0)
    action[6] = gripper
    return action


class LiberoDrawerCloser(Policy):
    """Waypoints in front of the drawer's region, then a push along -y (privileged)."""

    name = "libero-close-drawer"

    def __init__(self, protocol: str = "libero-v1", reach_m: float = 0.02) -> None:
        super().__init__()
        self.reach_m = reach_m

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities("libero-v1", ("state", "privileged.regions"), privileged=True,
                            runtime_invariant=True)

    def _reset(self, context: EpisodeContext) -> dict[str, Any]:
        return {"waypoints": None, "next": 0}

    def _act(self, observation: Observation, episode: dict[str, Any]) -> np.ndarray:
        eef = observation["state"][:3].astype(np.float64)
        if episode["waypoints"] is None:
            region = observation["privileged.regions"][0].astype(np.float64)
            episode["waypoints"] = [region + [0.0, 0.30, 0.10], region + [0.0, 0.30, -0.01],
                                    region + [0.0, -0.02, -0.01]]
        points = episode["waypoints"]
        if np.linalg.norm(points[episode["next"]] - eef) < self.reach_m and \
                episode["next"] < len(points) - 1:
            episode["next"] += 1
        return _toward(points[episode["next"]], eef, 1.0)  # a closed gripper pushes


class RobosuiteLifter(Policy):
    """Over the cube, down, grasp, lift (robosuite Lift; reads the cube's position)."""

    name = "robosuite-lift"
    GRASP_STEPS = 12

    def __init__(self, protocol: str = "robosuite-v1", reach_m: float = 0.01) -> None:
        super().__init__()
        self.reach_m = reach_m

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities("robosuite-v1", ("state", "privileged.state"), privileged=True,
                            runtime_invariant=True)

    def _reset(self, context: EpisodeContext) -> dict[str, Any]:
        return {"phase": 0, "cube": None, "grasp": 0}

    def _act(self, observation: Observation, episode: dict[str, Any]) -> np.ndarray:
        eef = observation["state"][:3].astype(np.float64)
        if episode["cube"] is None:
            episode["cube"] = observation["privileged.state"][:3].astype(np.float64)
        cube = episode["cube"]
        above, at, lifted = cube + [0, 0, 0.08], cube + [0, 0, -0.005], cube + [0, 0, 0.25]
        if episode["phase"] == 0 and np.linalg.norm(above - eef) < self.reach_m:
            episode["phase"] = 1
        if episode["phase"] == 1 and np.linalg.norm(at - eef) < self.reach_m:
            episode["phase"] = 2
        if episode["phase"] == 2:
            episode["grasp"] += 1
            if episode["grasp"] > self.GRASP_STEPS:
                episode["phase"] = 3
        target, gripper = [(above, -1.0), (at, -1.0), (at, 1.0), (lifted, 1.0)][episode["phase"]]
        return _toward(target, eef, gripper)
