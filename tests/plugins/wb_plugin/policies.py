"""A batching, deterministic policy defined outside the workbench.

``ResidualExpert`` is MetaWorld's scripted expert plus a correction from a small torch
network, computed for a whole batch in one forward pass. The network's weights are
multiples of 1/16 and its inputs are rounded to multiples of 1/64 and computed in
float64, so every partial sum is exact: the result of each row cannot depend on the
batch it was computed in (a batched matrix product adds in another order than a
single-row one; with exact sums the order does not matter). The correction is large
enough to change which episodes succeed and when.

``poison=(episode_id, step)`` makes ``act_batch`` raise for a batch holding that
episode's observation at or after that step, before any episode state changes.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.contracts import Capabilities, LoadContext, Observation
from workbench.policies.scripted import ScriptedExpert


class ResidualExpert(ScriptedExpert):
    """Scripted expert + an exact torch correction, batched natively up to ``max_batch``."""

    name = "residual-expert"
    preload = ScriptedExpert.preload + ("torch",)

    def __init__(self, max_batch: int = 8, scale: float = 0.25, seed: int = 0,
                 poison: Sequence[Any] | None = None, **expert_options: Any) -> None:
        super().__init__(**expert_options)
        self.max_batch, self.scale, self.seed = max_batch, scale, seed
        self.poison = None if poison is None else (str(poison[0]), int(poison[1]))
        self.net: Any = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities("metaworld-v1", ("privileged.state",), native_batching=True,
                            max_batch=self.max_batch, privileged=True)

    def _load(self, context: LoadContext) -> None:
        import torch

        super()._load(context)
        rng = np.random.default_rng(self.seed)
        net = torch.nn.Sequential(torch.nn.Linear(39, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
        with torch.no_grad():
            for param in net.parameters():
                param.copy_(torch.from_numpy(np.clip(np.round(rng.normal(0, 0.5, param.shape) * 16),
                                                     -32, 32) / 16))
        self.net = net.double().eval()

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        return self._act_batch([observation], [episode_state])[0]

    def _act_batch(self, observations: Sequence[Observation],
                   episode_states: Sequence[Any]) -> list[np.ndarray]:
        import torch

        if self.poison is not None and any(o["episode_id"] == self.poison[0]
                                           and o["step"] >= self.poison[1] for o in observations):
            raise ValueError(f"poisoned observation of {self.poison[0]}")
        state = np.stack([o["privileged.state"] for o in observations]).astype(np.float64)
        x = torch.from_numpy(np.clip(np.round(state * 64) / 64, -4, 4))
        with torch.inference_mode():
            correction = np.clip(self.net(x).numpy(), -1, 1) * self.scale
        expert = [super(ResidualExpert, self)._act(o, s)
                  for o, s in zip(observations, episode_states)]
        return [np.clip(a + c, -1, 1).astype(np.float32) for a, c in zip(expert, correction)]
