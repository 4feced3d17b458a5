"""A small torch vision policy: conv encoder over cameras, state and instruction -> action chunk.

The network (``VisionNet``) encodes each camera with a shared convolutional encoder,
the proprioceptive state with a linear layer and the instruction with a hashed bag of
words, and a head emits ``chunk_size`` actions in [-1, 1]. State and action sizes come
from the protocol the policy speaks. Weights start random (seeded) or load from a
``.pt`` file or the shipped ``"bc"`` weights (behaviour-cloned from the MetaWorld
scripted experts by :mod:`workbench.studies.training`), which fix the protocol, the
chunk length and the cameras. Runs on CPU or CUDA and batches natively.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from workbench.contracts.capabilities import Capabilities, LoadContext, Observation
from workbench.contracts.protocols import get_protocol
from workbench.policies.base import Policy

VOCAB_BUCKETS = 512


def hash_tokens(text: str, buckets: int = VOCAB_BUCKETS) -> list[int]:
    """Stable token ids for an instruction (crc32 of lower-cased words).

    >>> hash_tokens("Open the drawer") == hash_tokens("open the  drawer")
    True
    """
    return [zlib.crc32(w.encode()) % buckets for w in text.lower().split()]


def build_net(cameras: int, chunk_size: int, action_dim: int, state_dim: int,
              width: int = 32) -> Any:
    """The VisionNet module (imports torch lazily)."""
    import torch
    from torch import nn

    class VisionNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(3, width, 5, stride=4, padding=2), nn.ReLU(),
                nn.Conv2d(width, width * 2, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(width * 2, width * 2, 3, stride=2, padding=1), nn.ReLU(),
                nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.state = nn.Linear(state_dim, width)
            self.words = nn.EmbeddingBag(VOCAB_BUCKETS, width, mode="mean")
            self.head = nn.Sequential(
                nn.Linear(cameras * width * 2 + 2 * width, 256), nn.ReLU(),
                nn.Linear(256, chunk_size * action_dim), nn.Tanh())
            self.chunk_size, self.action_dim = chunk_size, action_dim

        def forward(self, images: torch.Tensor, state: torch.Tensor, tokens: torch.Tensor,
                    offsets: torch.Tensor) -> torch.Tensor:
            # images: (B, cameras, 3, H, W) float in [0, 1]
            b, c = images.shape[:2]
            feats = self.encoder(images.flatten(0, 1)).view(b, -1)
            x = torch.cat([feats, self.state(state), self.words(tokens, offsets)], dim=1)
            return self.head(x).view(b, self.chunk_size, self.action_dim)

    return VisionNet()


class VisionPolicy(Policy):
    """Reads ``cameras`` plus a state and ``instruction``; emits ``(chunk_size, dim)`` chunks.

    protocol: the protocol it speaks (the runner passes the benchmark's when a config
    names none; trained weights carry their own); state_feature: which state it reads
    (``state``, or ``state.eef8``, the 8-D LIBERO state openpi's and LeRobot's clients
    send).
    """

    name = "vision"
    preload = ("torch", "workbench.policies.vision")

    def __init__(self, protocol: str | None = None, chunk_size: int = 8,
                 cameras: Sequence[str] = ("images.primary", "images.wrist"),
                 weights: str | None = None, seed: int = 0, max_batch: int = 64,
                 threads: int | None = None, state_feature: str = "state") -> None:
        super().__init__()
        self.chunk_size, self.cameras = chunk_size, tuple(cameras)
        self.state_feature = state_feature
        self.weights, self.seed, self.max_batch, self.threads = weights, seed, max_batch, threads
        self.net: Any = None
        self._blob: dict | None = None
        if weights:  # trained weights fix what they were trained with
            from workbench.policies.weights import load_weights

            self._blob = load_weights(weights)
            self.chunk_size, self.cameras = self._blob["chunk_size"], tuple(self._blob["cameras"])
            if protocol not in (None, self._blob["protocol"]):
                raise ValueError(f"weights {weights!r} were trained for protocol "
                                 f"{self._blob['protocol']!r}, not {protocol!r}")
            protocol = self._blob["protocol"]
            self.name = f"vision-{Path(weights).stem}"
        if protocol is None:
            raise ValueError("VisionPolicy needs protocol=... (or weights that name one)")
        self.protocol = get_protocol(protocol)
        self.action_dim = self.protocol.action.dim
        self.state_dim = self.protocol.feature(state_feature).shape[0]

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(action_protocol=self.protocol.name,
                            features=self.cameras + (self.state_feature, "instruction"),
                            chunk_size=self.chunk_size, native_batching=True,
                            max_batch=self.max_batch)

    def _load(self, context: LoadContext) -> None:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        torch.manual_seed(self.seed)
        self.device = torch.device(context.device)
        self.net = build_net(len(self.cameras), self.chunk_size, self.action_dim, self.state_dim)
        if self._blob is not None:
            self.net.load_state_dict(self._blob["state_dict"])
        self.net.to(self.device).eval()

    def _unload(self) -> None:
        self.net = None

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        return self._act_batch([observation], [episode_state])[0]

    def _act_batch(self, observations: Sequence[Observation],
                   episode_states: Sequence[Any]) -> list[np.ndarray]:
        return [chunk.astype(np.float32) for chunk in self.forward(observations)]

    def forward(self, observations: Sequence[Observation]) -> np.ndarray:
        """Action chunks (B, chunk_size, action_dim) for a batch; needs ``load`` first."""
        import torch

        if self.net is None:
            raise RuntimeError("VisionPolicy.forward() before load()")
        with torch.inference_mode():
            return self.net(*self.preprocess(observations)).float().cpu().numpy()

    def preprocess(self, observations: Sequence[Observation]) -> tuple[Any, ...]:
        """Tensors for the network: images (B, cams, 3, H, W), state, tokens, offsets."""
        import torch

        images = np.stack([np.stack([o[c] for c in self.cameras]) for o in observations])
        images_t = torch.from_numpy(images).to(self.device).permute(0, 1, 4, 2, 3).float() / 255
        state = torch.from_numpy(np.stack([o[self.state_feature] for o in observations])).to(
            self.device)
        token_lists = [hash_tokens(o["instruction"]) or [0] for o in observations]
        offsets = torch.tensor(np.cumsum([0] + [len(t) for t in token_lists[:-1]]),
                               device=self.device)
        tokens = torch.tensor([t for ts in token_lists for t in ts], device=self.device)
        return images_t, state, tokens, offsets
