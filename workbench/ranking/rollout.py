"""Recorded rollouts as the ranking code reads them: one ``.npz`` per episode.

Arrays: ``actions`` (T, 4) float32 (end-effector xyz command, gripper command),
``state`` (T+1, 4) float32 (end-effector xyz, gripper aperture), ``success`` (T,) bool
(per-step success flag), ``reward`` (T,) float32. Optionally a video: a ``video`` string
entry in the npz, else an ``.mp4`` beside the npz with the same stem.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ep0.npz"
>>> save_rollout(synthetic_rollout("smooth", success=True, seed=0), path)
>>> ro = load_rollout(path)
>>> ro.actions.shape, ro.succeeded, ro.video is None
((60, 4), True, True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

KINDS = ("smooth", "jerky", "hesitant", "chattering")


@dataclass(frozen=True)
class Rollout:
    """One episode of T steps; validates shapes and dtypes on construction."""

    actions: NDArray[np.float32]
    state: NDArray[np.float32]
    success: NDArray[np.bool_]
    reward: NDArray[np.float32]
    video: str | None = None
    path: str | None = None

    def __post_init__(self) -> None:
        steps = len(self.actions)
        expected = {"actions": (steps, 4), "state": (steps + 1, 4), "success": (steps,),
                    "reward": (steps,)}
        for name, shape in expected.items():
            got = np.shape(getattr(self, name))
            if got != shape:
                raise ValueError(f"rollout {name}: expected shape {shape}, got {got}")
        if steps < 1:
            raise ValueError("rollout has no steps")
        for name in ("actions", "state", "reward"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"rollout {name} contains NaN or inf")

    @property
    def steps(self) -> int:
        """T, the number of actions."""
        return len(self.actions)

    @property
    def succeeded(self) -> bool:
        """Whether the success flag was raised at any step."""
        return bool(np.any(self.success))

    @property
    def first_success(self) -> int | None:
        """Index of the first step flagged successful, None if never."""
        hits = np.flatnonzero(self.success)
        return int(hits[0]) if len(hits) else None


def load_rollout(path: str | os.PathLike) -> Rollout:
    """Read a rollout ``.npz``; raises ValueError naming missing or malformed arrays."""
    path = Path(path)
    with np.load(path, allow_pickle=False) as data:
        missing = sorted({"actions", "state", "success", "reward"} - set(data.files))
        if missing:
            raise ValueError(f"{path}: missing arrays {missing}")
        video = str(data["video"]) if "video" in data.files else None
        arrays = {k: data[k] for k in ("actions", "state", "success", "reward")}
    if video is None and path.with_suffix(".mp4").exists():
        video = str(path.with_suffix(".mp4"))
    if arrays["success"].dtype != np.bool_:
        raise ValueError(f"{path}: success must be bool, got {arrays['success'].dtype}")
    return Rollout(actions=arrays["actions"].astype(np.float32),
                   state=arrays["state"].astype(np.float32), success=arrays["success"],
                   reward=arrays["reward"].astype(np.float32), video=video, path=str(path))


def save_rollout(rollout: Rollout, path: str | os.PathLike) -> None:
    """Write ``rollout`` in the npz format :func:`load_rollout` reads."""
    extra = {"video": np.array(rollout.video)} if rollout.video else {}
    np.savez(path, actions=rollout.actions, state=rollout.state, success=rollout.success,
             reward=rollout.reward, **extra)


def synthetic_rollout(kind: str = "smooth", success: bool = True, steps: int = 60,
                      seed: int = 0) -> Rollout:
    """A made-up episode for tests and demos: a reach-grasp-lift of one of ``KINDS``.

    smooth: minimum-jerk path, one gripper close; jerky: the same with step noise;
    hesitant: pauses and back-and-forth moves; chattering: gripper command toggling.
    A failing rollout stops short of the goal. No simulator is involved.

    >>> ro = synthetic_rollout("jerky", success=False, seed=1)
    >>> ro.succeeded, ro.state.shape
    (False, (61, 4))
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
