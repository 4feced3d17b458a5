"""Made-up rollouts for tests and demos of the ranking code (no simulator involved).

>>> ro = synthetic_rollout("jerky", success=False, seed=1)
>>> ro.succeeded, ro.state.shape
(False, (61, 4))
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from workbench.records.rollout import Rollout

KINDS = ("smooth", "jerky", "hesitant", "chattering")


def synthetic_rollout(kind: str = "smooth", success: bool = True, steps: int = 60,
                      seed: int = 0) -> Rollout:
    """A made-up episode for tests and demos: a reach-grasp-lift of one of ``KINDS``.

    smooth: minimum-jerk path, one gripper close; jerky: the same with step noise;
    hesitant: pauses and back-and-forth moves; chattering: gripper command toggling.
    A failing rollout stops short of the goal. No simulator is involved.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown rollout kind {kind!r}; available: {list(KINDS)}")
    rng = np.random.default_rng(seed)
    goal = np.array([0.3, 0.2, 0.25]) + rng.normal(0, 0.02, 3)
    phase = np.linspace(0, 1, steps + 1)
    if kind == "hesitant":
        phase = _hesitate(phase)
    reach = phase if success else 0.7 * phase
    path = np.outer(10 * reach**3 - 15 * reach**4 + 6 * reach**5, goal)
    if kind == "jerky":
        path += rng.normal(0, 0.01, path.shape)
    grip = np.where(phase > 0.5, -1.0, 1.0)
    if kind == "chattering":
        grip = np.where(rng.random(steps + 1) < 0.3, -grip, grip)
    state = np.column_stack([path, (grip + 1) / 2]).astype(np.float32)
    actions = np.column_stack([np.diff(path, axis=0), grip[1:]]).astype(np.float32)
    dist = np.linalg.norm(path[1:] - goal, axis=1)
    flags = (dist < 0.01) & success
    return Rollout(actions=actions, state=state, success=flags,
                   reward=(1 - dist / np.linalg.norm(goal)).astype(np.float32))


def _hesitate(phase: NDArray[np.float64]) -> NDArray[np.float64]:
    """Re-time a 0-1 phase to hold still twice and step back once, still ending at 1."""
    n = len(phase) - 1
    speed = np.ones(n)
    for lo in (n // 5, n // 2):
        speed[lo:lo + n // 10] = 0.0
    speed[int(0.7 * n):int(0.75 * n)] = -1.0
    out = np.concatenate([[0.0], np.cumsum(speed)])
    return out / out[-1]
