"""Nearest-neighbour behaviour: replay the demonstration chunk whose state is closest.

A non-parametric policy of another kind than the behaviour-cloned networks: it keeps
the demonstrations (standardised privileged states with the expert's next actions)
and, at each call, returns the action chunk of the nearest kept state among
demonstrations of the same instruction (Euclidean distance after standardising).
Reads ``privileged.state``, so its results are diagnostics of a study, not scores.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "nn.npz"
>>> states = np.array([[0.0] * 39, [1.0] * 39], np.float32)
>>> chunks = np.array([[[0.1] * 4], [[0.9] * 4]], np.float32)
>>> _ = save_demo_memory(path, states, chunks, ["reach", "reach"], "metaworld-v1")
>>> policy = NearestNeighbourPolicy(data=str(path))
>>> round(float(policy.nearest(np.full(39, 0.8, np.float32), "reach")[0, 0]), 3)
0.9
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from workbench.contracts.capabilities import Capabilities, LoadContext, Observation
from workbench.contracts.protocols import get_protocol
from workbench.policies.base import Policy
from workbench.policies.state_bc import STATE_FEATURE


def save_demo_memory(path: str | Path, states: np.ndarray, chunks: np.ndarray,
                     instructions: Sequence[str], protocol: str,
                     meta: dict | None = None) -> Path:
    """Write a memory: states (N, S), chunks (N, K, A) and one instruction per row."""
    states, chunks = np.asarray(states, np.float32), np.asarray(chunks, np.float32)
    if len(states) != len(chunks) or len(states) != len(instructions) or not len(states):
        raise ValueError(f"a demo memory needs as many states, chunks and instructions "
                         f"(and at least one); got {len(states)}, {len(chunks)}, "
                         f"{len(instructions)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, states=states, chunks=chunks,
                        instructions=np.asarray(instructions, dtype=str),
                        protocol=np.asarray(protocol), meta=np.asarray(repr(meta or {})))
    return path


class NearestNeighbourPolicy(Policy):
    """Returns the chunk of the nearest demonstration state with the same instruction.

    data: a memory from :func:`save_demo_memory`; the name is ``state-nn-<file stem>``.
    """

    name = "state-nn"

    def __init__(self, data: str, protocol: str | None = None) -> None:
        super().__init__()
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"no demo memory at {path}")
        with np.load(path) as blob:
            self.states, self.chunks = blob["states"], blob["chunks"]
            self.instructions = blob["instructions"].astype(str)
            stored = str(blob["protocol"])
        if protocol not in (None, stored):
            raise ValueError(f"memory {data!r} holds protocol {stored!r}, not {protocol!r}")
        self.protocol = get_protocol(stored)
        self.name = f"state-nn-{path.stem}"
        self.std = self.states.std(axis=0) + 1e-6
        self.scaled = self.states / self.std  # standardised once, searched at every call

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(action_protocol=self.protocol.name,
                            features=(STATE_FEATURE, "instruction"),
                            chunk_size=self.chunks.shape[1], privileged=True,
                            runtime_invariant=True)

    def _load(self, context: LoadContext) -> None:
        pass

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        return self.nearest(observation[STATE_FEATURE], observation["instruction"])

    def nearest(self, state: np.ndarray, instruction: str) -> np.ndarray:
        """The (chunk_size, dim) chunk of the nearest demonstration of ``instruction``."""
        rows = np.flatnonzero(self.instructions == instruction)
        if not len(rows):
            raise ValueError(f"no demonstration for instruction {instruction!r}; the memory "
                             f"holds {sorted(set(self.instructions))}")
        query = np.asarray(state, np.float32) / self.std
        distance = np.sum((self.scaled[rows] - query) ** 2, axis=1)
        return self.chunks[rows[int(np.argmin(distance))]].copy()
