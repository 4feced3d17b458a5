"""Behaviour cloning of the vision policy from scripted-expert rollouts, on the CPU.

Demonstrations are expert episodes run through the runtime's step loop, with a
:class:`DemoRecorder` watching: every ``stride`` steps it reads the cameras (the
benchmark's own, at its default quality: the same pixels the policy sees at
evaluation) and the state; each kept observation's target is the expert's next
``chunk_size`` actions (the last action repeated past the episode's end). Training
minimizes the mean squared error of the chunk.

``python -m workbench.studies.training`` trains the shipped ``"bc"`` weights in about
two CPU minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from workbench.benchmarks import BenchmarkAdapter, make_benchmark
from workbench.benchmarks.base import StepResult
from workbench.contracts.capabilities import LoadContext
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.results import EpisodeResult
from workbench.policies import make_policy
from workbench.policies.weights import SHIPPED, save_weights
from workbench.runtime.episode import EpisodeObserver, run_episode


@dataclass
class Demos:
    """Training arrays: images (N, cams, H, W, 3) uint8, state (N, S), targets (N, K, A)."""

    images: np.ndarray
    state: np.ndarray
    instructions: list[str]
    targets: np.ndarray


@dataclass
class DemoRecorder(EpisodeObserver):
    """Keeps every ``stride``-th observation (cameras, possibly none, and the
    ``state_key`` feature) and every action."""

    cameras: tuple[str, ...]
    chunk_size: int
    stride: int
    state_key: str = "state"
    kept: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)

    def before_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray) -> None:
        if step % self.stride == 0:
            obs = adapter.observe(self.cameras + (self.state_key,))
            images = (np.stack([obs[c] for c in self.cameras]) if self.cameras
                      else np.zeros(0, np.uint8))
            self.kept.append((step, images, obs[self.state_key]))

    def after_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray,
                   result: StepResult, seconds: float) -> None:
        self.actions.append(np.asarray(action, np.float32))

    def samples(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(cameras, state, target chunk) per kept observation."""
        padded = np.concatenate([self.actions, np.repeat(self.actions[-1:], self.chunk_size, 0)])
        return [(cams, state, padded[step:step + self.chunk_size])
                for step, cams, state in self.kept]


def collect_demos(adapter: BenchmarkAdapter, plan: Sequence[EpisodeSpec],
                  cameras: Sequence[str], chunk_size: int, stride: int = 4,
                  state_key: str = "state") -> Demos:
    """Run the scripted expert on ``plan`` and keep every ``stride``-th observation
    (``images`` is (N, 0) when ``cameras`` is empty)."""
    expert = make_policy("expert")
    expert.load(LoadContext(adapter.protocol.name))
    images, states, texts, targets = [], [], [], []
    for spec in plan:
        recorder = DemoRecorder(tuple(cameras), chunk_size, stride, state_key)
        result: EpisodeResult = run_episode(adapter, expert, spec, observers=[recorder])
        if result.error_kind is not None:
            raise RuntimeError(f"demonstration {spec.episode_id} failed: {result.error_message}")
        for cams, state, target in recorder.samples():
            images.append(cams)
            states.append(state)
            texts.append(adapter.instruction(spec.task))
            targets.append(target)
    return Demos(np.stack(images), np.stack(states), texts, np.stack(targets))


def train_behavior_cloning(demos: Demos, chunk_size: int, epochs: int = 30,
                           batch_size: int = 64, lr: float = 1e-3,
                           seed: int = 0) -> tuple[dict, list[float]]:
    """Fit VisionNet to the demos; returns its state dict and the loss per epoch."""
    import torch

    from workbench.policies.vision import build_net, hash_tokens

    torch.manual_seed(seed)
    net = build_net(demos.images.shape[1], chunk_size, demos.targets.shape[2],
                    demos.state.shape[1])
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    images = torch.from_numpy(demos.images).permute(0, 1, 4, 2, 3).float() / 255
    state = torch.from_numpy(demos.state)
    targets = torch.from_numpy(demos.targets)
    tokens = [hash_tokens(t) or [0] for t in demos.instructions]
    rng, losses = np.random.default_rng(seed), []
    for _ in range(epochs):
        order, total = rng.permutation(len(targets)), 0.0
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            words = [tokens[i] for i in idx]
            offsets = torch.tensor(np.cumsum([0] + [len(w) for w in words[:-1]]))
            flat = torch.tensor([t for w in words for t in w])
            loss = torch.nn.functional.mse_loss(
                net(images[idx], state[idx], flat, offsets), targets[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        losses.append(total / len(order))
    return net.state_dict(), losses


def train_shipped_weights(out: str | Path = SHIPPED["bc"], suite: str = "MT10",
                          tasks: Sequence[str] = ("reach-v3", "drawer-close-v3"),
                          episodes: range = range(10, 30), image_size: int = 64,
                          chunk_size: int = 8, stride: int = 5, epochs: int = 40,
                          seed: int = 0) -> tuple[Path, list[float]]:
    """Collect demos and train the weights shipped as ``"bc"``; episodes 0-9 stay held out."""
    cameras = ("images.primary", "images.wrist")
    adapter = make_benchmark("metaworld", suite=suite, image_size=image_size)
    plan = [EpisodeSpec("metaworld", suite, t, i, i) for t in tasks for i in episodes]
    try:
        demos = collect_demos(adapter, plan, cameras, chunk_size, stride)
    finally:
        adapter.close()
    state_dict, losses = train_behavior_cloning(demos, chunk_size, epochs, seed=seed)
    meta: dict[str, Any] = {"suite": suite, "tasks": list(tasks),
                            "train_episodes": [episodes.start, episodes.stop],
                            "image_size": image_size, "stride": stride, "epochs": epochs,
                            "samples": len(demos.targets), "final_loss": losses[-1]}
    return save_weights(out, state_dict, chunk_size, cameras, adapter.protocol.name, meta), losses


if __name__ == "__main__":
    path, history = train_shipped_weights()
    print(f"wrote {path}; loss {history[0]:.4f} -> {history[-1]:.4f}")
