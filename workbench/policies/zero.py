"""A policy that emits zero actions for any protocol: a smoke test of the plumbing.

>>> from workbench.contracts.capabilities import EpisodeContext, LoadContext
>>> policy = ZeroPolicy("libero-v1")
>>> _ = policy.load(LoadContext("libero-v1"))
>>> policy.reset(EpisodeContext("e0", "task", "do it", 0))
>>> policy.act({"episode_id": "e0", "state": None}).tolist()
[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.contracts.capabilities import Capabilities, Observation
from workbench.contracts.protocols import get_protocol
from workbench.policies.base import Policy


class ZeroPolicy(Policy):
    """Zero actions of the protocol's action size; reads only ``state``.

    protocol: the protocol it speaks; the runner passes the benchmark's when a config
    does not name one.
    """

    name = "zero"

    def __init__(self, protocol: str) -> None:
        super().__init__()
        self._caps = Capabilities(action_protocol=protocol, features=("state",),
                                  runtime_invariant=True)
        self._dim = get_protocol(protocol).action.dim

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        return np.zeros(self._dim, np.float32)
