"""A behaviour-cloned MLP on the privileged state: ``(39-D state, instruction) -> action chunk``.

Small and fast to train and to run (no camera is read, so nothing is rendered), which
makes it the candidate of choice for studies that need many policies of unplanned
quality, such as the judges' held-out validation
(:mod:`workbench.studies.candidates` trains them). It reads ``privileged.state``, so
its results are diagnostics of such studies, not benchmark scores.

A weights file (:func:`save_state_bc`) holds the network's state dict, the state
normalisation (mean, std), the chunk length, the width, the protocol and ``meta``.

>>> policy = StateBCPolicy(protocol="metaworld-v1", seed=0)
>>> policy.capabilities.features, policy.capabilities.privileged
(('privileged.state', 'instruction'), True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from workbench.contracts.capabilities import Capabilities, LoadContext, Observation
from workbench.contracts.protocols import get_protocol
from workbench.policies.base import Policy
from workbench.policies.vision import VOCAB_BUCKETS, hash_tokens

STATE_FEATURE = "privileged.state"


def build_state_net(state_dim: int, chunk_size: int, action_dim: int, width: int = 256) -> Any:
    """The MLP (imports torch lazily): state and a hashed bag of instruction words in,
    ``(B, chunk_size, action_dim)`` actions in [-1, 1] out."""
    import torch
    from torch import nn

    class StateNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.EmbeddingBag(VOCAB_BUCKETS, 32, mode="mean")
            self.body = nn.Sequential(
                nn.Linear(state_dim + 32, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                nn.Linear(width, chunk_size * action_dim), nn.Tanh())
            self.chunk_size, self.action_dim = chunk_size, action_dim

        def forward(self, state: torch.Tensor, tokens: torch.Tensor,
                    offsets: torch.Tensor) -> torch.Tensor:
            x = torch.cat([state, self.words(tokens, offsets)], dim=1)
            return self.body(x).view(len(state), self.chunk_size, self.action_dim)

    return StateNet()


def token_batch(instructions: Sequence[str]) -> tuple[Any, Any]:
    """(flat token ids, offsets) for an EmbeddingBag over ``instructions``."""
    import torch

    lists = [hash_tokens(text) or [0] for text in instructions]
    offsets = torch.tensor(np.cumsum([0] + [len(t) for t in lists[:-1]]))
    return torch.tensor([t for ts in lists for t in ts]), offsets


def save_state_bc(path: str | Path, state_dict: dict, mean: np.ndarray, std: np.ndarray,
                  chunk_size: int, width: int, protocol: str, meta: dict | None = None) -> Path:
    """Write a :class:`StateBCPolicy` weights file."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"kind": "state-bc", "state_dict": state_dict, "mean": np.asarray(mean, np.float32),
                "std": np.asarray(std, np.float32), "chunk_size": chunk_size, "width": width,
                "protocol": protocol, "meta": meta or {}}, path)
    return path


def load_state_bc(path: str | Path) -> dict:
    """Read a file written by :func:`save_state_bc`; refuses anything else by name."""
    import torch

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no state-bc weights at {path}")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises RuntimeError or UnpicklingError by format
        raise ValueError(f"{path} is not a state-bc weights file (torch could not read it: "
                         f"{type(exc).__name__})") from exc
    if not isinstance(blob, dict) or blob.get("kind") != "state-bc":
        raise ValueError(f"{path} is not a state-bc weights file (write it with save_state_bc)")
    return blob


class StateBCPolicy(Policy):
    """Reads ``privileged.state`` and ``instruction``; emits ``(chunk_size, dim)`` chunks.

    weights: a file from :func:`save_state_bc` (None: random, seeded, for tests); the
    policy's name is ``state-bc-<file stem>``, so candidates stay apart in records.
    """

    name = "state-bc"
    preload = ("torch", "workbench.policies.state_bc")

    def __init__(self, protocol: str | None = None, weights: str | None = None,
                 chunk_size: int = 4, width: int = 256, seed: int = 0,
                 max_batch: int = 64, threads: int | None = 1) -> None:
        """threads: torch threads of the process that loads it (as VisionPolicy's; a
        small MLP runs fastest on one, and does not spin on cores the simulators use)."""
        super().__init__()
        self.weights, self.seed, self.max_batch = weights, seed, max_batch
        self.threads = threads
        self._blob = load_state_bc(weights) if weights else None
        if self._blob is not None:
            if protocol not in (None, self._blob["protocol"]):
                raise ValueError(f"weights {weights!r} were trained for protocol "
                                 f"{self._blob['protocol']!r}, not {protocol!r}")
            protocol, chunk_size = self._blob["protocol"], self._blob["chunk_size"]
            width = self._blob["width"]
            self.name = f"state-bc-{Path(weights).stem}"
        if protocol is None:
            raise ValueError("StateBCPolicy needs protocol=... (or weights that name one)")
        self.protocol = get_protocol(protocol)
        self.chunk_size, self.width = chunk_size, width
        self.state_dim = self.protocol.feature(STATE_FEATURE).shape[0]
        self.net: Any = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(action_protocol=self.protocol.name,
                            features=(STATE_FEATURE, "instruction"), chunk_size=self.chunk_size,
                            native_batching=True, max_batch=self.max_batch, privileged=True)

    def _load(self, context: LoadContext) -> None:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        torch.manual_seed(self.seed)
        self.net = build_state_net(self.state_dim, self.chunk_size,
                                   self.protocol.action.dim, self.width)
        if self._blob is not None:
            self.net.load_state_dict(self._blob["state_dict"])
            self.mean, self.std = self._blob["mean"], self._blob["std"]
        else:
            self.mean = np.zeros(self.state_dim, np.float32)
            self.std = np.ones(self.state_dim, np.float32)
        self.net.eval()

    def _unload(self) -> None:
        self.net = None

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        return self._act_batch([observation], [episode_state])[0]

    def _act_batch(self, observations: Sequence[Observation],
                   episode_states: Sequence[Any]) -> list[np.ndarray]:
        import torch

        state = np.stack([o[STATE_FEATURE] for o in observations]).astype(np.float32)
        tokens, offsets = token_batch([o["instruction"] for o in observations])
        with torch.inference_mode():
            out = self.net(torch.from_numpy((state - self.mean) / self.std), tokens, offsets)
        return [chunk for chunk in out.numpy().astype(np.float32)]
