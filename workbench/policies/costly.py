"""The scripted expert paying a vision policy's full cost, for throughput measurements.

While no vision policy solves MetaWorld, speed must still be measured on episodes that
end by success, as in a real evaluation. This policy reads both cameras, state and
instruction (so every camera is rendered at every chunk boundary) and runs the
:class:`~workbench.policies.vision.VisionPolicy` network on them, batched; then it
discards the network output and emits the scripted expert's action held for the
whole chunk (open loop). It reads privileged state, so results are diagnostics.
Deterministic and batch-invariant: outcomes do not depend on batching.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.contracts.capabilities import Capabilities, LoadContext, Observation
from workbench.policies.scripted import ScriptedExpert
from workbench.policies.vision import VisionPolicy


class VisionCostExpert(ScriptedExpert):
    """Expert actions, held for ``chunk_size`` steps, after a vision forward pass."""

    name = "expert-vision-cost"
    preload = ScriptedExpert.preload + VisionPolicy.preload

    def __init__(self, chunk_size: int = 8, cameras: Sequence[str] = ("images.primary",
                 "images.wrist"), max_batch: int = 64, threads: int | None = None) -> None:
        super().__init__()
        self.vision = VisionPolicy("metaworld-v1", chunk_size, cameras, max_batch=max_batch,
                                   threads=threads)
        self.chunk_size = chunk_size

    @property
    def capabilities(self) -> Capabilities:
        vision = self.vision.capabilities
        return Capabilities(action_protocol="metaworld-v1",
                            features=vision.features + ("privileged.state",),
                            chunk_size=self.chunk_size, native_batching=True,
                            max_batch=vision.max_batch, privileged=True,
                            runtime_invariant=True)  # the expert's actions; the net's unused

    def _load(self, context: LoadContext) -> None:
        super()._load(context)
        self.vision.load(context)

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        return self._act_batch([observation], [episode_state])[0]

    def _act_batch(self, observations: Sequence[Observation],
                   episode_states: Sequence[Any]) -> list[np.ndarray]:
        self.vision.forward(observations)  # pay the network's cost; output unused
        return [np.repeat(super(VisionCostExpert, self)._act(o, s)[None], self.chunk_size, 0)
                for o, s in zip(observations, episode_states)]
