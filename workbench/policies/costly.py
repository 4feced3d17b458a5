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


class MLPCostExpert(ScriptedExpert):
    """Expert actions after a wide MLP's forward pass on the state, for the policy-bound
    regime of throughput measurements: the network (``layers`` square layers of ``width``,
    seeded random weights, float32) is what the policy costs, its output discarded. On a CPU
    one call at batch 1 reads every weight once (a matrix-vector product, bound by memory),
    and a batch of ``b`` reads them once too, so batching shows as its own factor.
    Deterministic and batch-invariant like :class:`VisionCostExpert`; reads privileged
    state, so results are diagnostics."""

    name = "expert-mlp-cost"
    preload = ScriptedExpert.preload + ("torch",)

    def __init__(self, width: int = 2048, layers: int = 4, chunk_size: int = 1,
                 max_batch: int = 64, threads: int | None = None) -> None:
        super().__init__()
        self.width, self.layers, self.chunk_size = int(width), int(layers), int(chunk_size)
        self.max_batch, self.threads = int(max_batch), threads
        self._weights: list[Any] = []

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(action_protocol="metaworld-v1", features=("privileged.state",),
                            chunk_size=self.chunk_size, native_batching=True,
                            max_batch=self.max_batch, privileged=True,
                            runtime_invariant=True)

    def _load(self, context: LoadContext) -> None:
        super()._load(context)
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        generator = torch.Generator().manual_seed(0)
        self._weights = [torch.randn(self.width, self.width, generator=generator)
                         / self.width ** 0.5 for _ in range(self.layers)]

    def forward(self, observations: Sequence[Observation]) -> None:
        """The network on a batch of states (padded to ``width``); output unused."""
        import torch

        states = np.stack([np.asarray(o["privileged.state"], np.float32) for o in observations])
        x = torch.zeros(len(observations), self.width)
        x[:, :states.shape[1]] = torch.from_numpy(states)
        with torch.inference_mode():
            for weight in self._weights:
                x = torch.relu(x @ weight)

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        return self._act_batch([observation], [episode_state])[0]

    def _act_batch(self, observations: Sequence[Observation],
                   episode_states: Sequence[Any]) -> list[np.ndarray]:
        self.forward(observations)
        return [np.repeat(super(MLPCostExpert, self)._act(o, s)[None], self.chunk_size, 0)
                for o, s in zip(observations, episode_states)]
