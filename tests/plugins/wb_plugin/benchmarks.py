"""A benchmark defined outside the workbench: MetaWorld with harness faults on demand.

``FaultyMetaWorld`` is the MetaWorld adapter whose renderer fails, or whose camera
frames come back larger than the run was sized for, in one chosen episode from a chosen
step on: what a lost EGL context or a misconfigured camera does to a real harness.
``fail_render`` and ``oversize`` name ``(task, init_state_id, step)``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from wb_plugin.protocols import ARM
from workbench.benchmarks.metaworld import MetaWorldAdapter
from workbench.contracts import EpisodeSpec


class FaultyMetaWorld(MetaWorldAdapter):
    """MetaWorld, with a render failure or oversized frames in one episode."""

    def __init__(self, suite: str = "MT10", seed: int = 0, image_size: int = 224,
                 fail_render: Sequence[Any] | None = None,
                 oversize: Sequence[Any] | None = None) -> None:
        super().__init__(suite, seed, image_size)
        self.fail_render = None if fail_render is None else tuple(fail_render)
        self.oversize = None if oversize is None else tuple(oversize)
        self._episode: tuple[str, int] | None = None

    def reset(self, episode: EpisodeSpec) -> None:
        super().reset(episode)
        self._episode = (episode.task, episode.init_state_id)

    def _hit(self, fault: tuple | None) -> bool:
        return (fault is not None and self._episode == (fault[0], int(fault[1]))
                and self._steps >= int(fault[2]))

    def render(self, feature: str = "images.primary") -> np.ndarray:
        if self._hit(self.fail_render):
            raise RuntimeError("EGL: the rendering context was lost")
        frame = super().render(feature)
        if self._hit(self.oversize):
            return np.ascontiguousarray(np.repeat(np.repeat(frame, 2, 0), 2, 1))
        return frame


class EarlySuccessMetaWorld(MetaWorldAdapter):
    """MetaWorld whose even-numbered episodes succeed at step ``succeed_at`` (and stay
    succeeded): a success a policy reading public features can reach on cue."""

    def __init__(self, suite: str = "MT10", seed: int = 0, image_size: int = 224,
                 succeed_at: int = 5) -> None:
        super().__init__(suite, seed, image_size)
        self.succeed_at = int(succeed_at)
        self._even = False

    def reset(self, episode: EpisodeSpec) -> None:
        super().reset(episode)
        self._even = episode.init_state_id % 2 == 0

    def step(self, action: np.ndarray):
        result = super().step(action)
        if self._even and self._steps >= self.succeed_at:
            result.success, result.done = True, True
        return result


class PluginArm(MetaWorldAdapter):
    """MetaWorld's scenes behind the plugin's own protocol, ``plugin-arm-v1``."""

    name = "plugin-arm"
    protocol = ARM
