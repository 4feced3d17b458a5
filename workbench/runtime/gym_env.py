"""A gymnasium view of any adapter: canonical features in, contract-checked actions out.

For researchers who want the gymnasium API (and for ``gymnasium.utils.env_checker``).
It drives the runtime's :class:`~workbench.runtime.episode.EpisodeStepper`, so the
adapter is stepped by the same code (and watched by the same observers) as in an
evaluation.
``reset(seed=s)`` starts initial state ``s % num_init_states`` of the chosen task, so a
seed reproduces a start; ``reset(options={"init_state_id": i})`` picks one directly.
"""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import validate_action
from workbench.runtime.episode import EpisodeObserver, EpisodeStepper, video_feature


def _space(feature: Any, image_size: int) -> gym.Space:
    if feature.dtype == "str":
        return gym.spaces.Text(max_length=256, charset=_CHARSET)
    shape = tuple(image_size if d is None else d for d in feature.shape)
    if feature.dtype == "uint8":
        return gym.spaces.Box(0, 255, shape, np.uint8)
    return gym.spaces.Box(-np.inf, np.inf, shape, np.dtype(feature.dtype))


_CHARSET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.-'"


class CanonicalEnv(gym.Env):
    """One task of an adapter as a gymnasium environment over canonical features."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, adapter: BenchmarkAdapter, task: str, features: Sequence[str],
                 image_size: int = 224, num_init_states: int = 50,
                 render_mode: str | None = None,
                 observers: Sequence[EpisodeObserver] = ()) -> None:
        self.adapter, self.task, self.features = adapter, task, tuple(features)
        self.observers = tuple(observers)
        self._stepper: EpisodeStepper | None = None
        self.num_init_states, self.render_mode = num_init_states, render_mode
        proto = adapter.protocol
        self.observation_space = gym.spaces.Dict(
            {name: _space(proto.feature(name), image_size) for name in self.features})
        low, high = proto.action.bounds()
        self.action_space = gym.spaces.Box(low.astype(np.float32), high.astype(np.float32),
                                           (proto.action.dim,), np.dtype(proto.action.dtype))

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        init = (options or {}).get("init_state_id")
        if init is None:
            init = int(self.np_random.integers(self.num_init_states))
        spec = EpisodeSpec(self.adapter.name, self.adapter.suite, self.task,
                           int(init), int(init))
        self._stepper = EpisodeStepper(self.adapter, spec, self.observers)
        self._stepper.reset()
        return self._observe(), {"init_state_id": int(init)}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        if self._stepper is None:
            raise RuntimeError("CanonicalEnv.step() before reset()")
        chunk = validate_action(self.adapter.protocol, np.asarray(action, np.float32))
        result = self._stepper.apply(chunk[0])
        info = {"success": result.success}
        return (self._observe(), result.reward, result.success,
                result.done and not result.success, info)

    def _observe(self) -> dict[str, Any]:
        obs = self._stepper.read(self.features)
        return {name: obs[name] for name in self.features}

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self.adapter.render(video_feature(self.adapter))

    def close(self) -> None:
        self.adapter.close()
