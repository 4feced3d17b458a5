"""Rollout files: one ``.npz`` per episode, written by the runtime, read by rankings.

Arrays: ``actions`` (T, A) float32 (the actions applied, A the protocol's action size),
``state`` (T+1, S) float32 (the adapter's trajectory state before each step and after
the last; for MetaWorld S = 4: end-effector xyz and gripper aperture), ``success``
(T,) bool (per-step success flag), ``reward`` (T,) float32. Optionally a video: a
``video`` string entry in the npz, else an ``.mp4`` beside the npz with the same stem.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ep0.npz"
>>> rollout = Rollout(np.zeros((3, 7), np.float32), np.zeros((4, 2), np.float32),
...                   np.array([False, False, True]), np.zeros(3, np.float32))
>>> _ = save_rollout(rollout, path)
>>> ro = load_rollout(path)
>>> ro.actions.shape, ro.state.shape, ro.succeeded, ro.first_success, ro.video is None
((3, 7), (4, 2), True, 2, True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray


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
        if steps < 1:
            raise ValueError("rollout has no steps")
        if np.ndim(self.actions) != 2 or np.ndim(self.state) != 2:
            raise ValueError(f"rollout actions and state: expected 2-D; got shapes "
                             f"{np.shape(self.actions)} and {np.shape(self.state)}")
        expected = {"state": (steps + 1, np.shape(self.state)[1]), "success": (steps,),
                    "reward": (steps,)}
        for name, shape in expected.items():
            got = np.shape(getattr(self, name))
            if got != shape:
                raise ValueError(f"rollout {name}: expected shape {shape}; got {got}")
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
        raise ValueError(f"{path}: success: expected bool; got {arrays['success'].dtype}")
    return Rollout(actions=arrays["actions"].astype(np.float32),
                   state=arrays["state"].astype(np.float32), success=arrays["success"],
                   reward=arrays["reward"].astype(np.float32), video=video, path=str(path))


def save_rollout(rollout: Rollout, path: str | os.PathLike) -> str:
    """Write ``rollout`` in the npz format :func:`load_rollout` reads; returns the path."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    extra = {"video": np.array(rollout.video)} if rollout.video else {}
    np.savez_compressed(path, actions=rollout.actions, state=rollout.state,
                        success=rollout.success, reward=rollout.reward, **extra)
    return str(path)
