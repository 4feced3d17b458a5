"""Behaviour cloning of the vision policy from scripted-expert rollouts, on the CPU.

Demonstrations are expert episodes rendered with the benchmark's own cameras at its
default quality (the same pixels the policy sees at evaluation). An observation is
kept every ``stride`` steps; its target is the expert's next ``chunk_size`` actions
(the last action repeated past the episode's end). Training minimizes the mean
squared error of the chunk.

>>> weights_path("bc").name
'vision_bc.pt'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from workbench.plan import EpisodeSpec

DATA = Path(__file__).resolve().parents[1] / "data"
SHIPPED = {"bc": DATA / "vision_bc.pt"}


def weights_path(name: str) -> Path:
    """A shipped weights name ("bc") or a path to a ``.pt`` file."""
    return SHIPPED.get(name, Path(name))


@dataclass
class Demos:
    """Training arrays: images (N, cams, H, W, 3) uint8, state (N, 4), targets (N, K, 4)."""

    images: np.ndarray
    state: np.ndarray
    instructions: list[str]
    targets: np.ndarray


def collect_demos(adapter: Any, plan: Sequence[EpisodeSpec], cameras: Sequence[str],
                  chunk_size: int, stride: int = 4) -> Demos:
    """Run the scripted expert on ``plan`` and keep every ``stride``-th observation."""
    from metaworld.policies import ENV_POLICY_MAP

    images, states, texts, targets = [], [], [], []
    for spec in plan:
        adapter.reset(spec)
        expert = ENV_POLICY_MAP[spec.task]()
        obs_steps, actions = [], []
        for step in range(adapter.max_steps):
            if step % stride == 0:
                obs = adapter.observe(tuple(cameras) + ("state",))
                obs_steps.append((step, np.stack([obs[c] for c in cameras]), obs["state"]))
            action = np.clip(expert.get_action(adapter.privileged_state()), -1, 1)
            actions.append(action.astype(np.float32))
            if adapter.step(actions[-1]).done:
                break
        padded = np.concatenate([actions, np.repeat(actions[-1:], chunk_size, 0)])
        for step, cams, state in obs_steps:
            images.append(cams)
            states.append(state)
            texts.append(adapter.instruction(spec.task))
            targets.append(padded[step:step + chunk_size])
    return Demos(np.stack(images), np.stack(states), texts, np.stack(targets))


def train_behavior_cloning(demos: Demos, chunk_size: int, epochs: int = 30,
                           batch_size: int = 64, lr: float = 1e-3,
                           seed: int = 0) -> tuple[dict, list[float]]:
    """Fit VisionNet to the demos; returns its state dict and the loss per epoch."""
    import torch

    from workbench.policies.vision import build_net, hash_tokens

    torch.manual_seed(seed)
    net = build_net(demos.images.shape[1], chunk_size)
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


def save_weights(path: str | Path, state_dict: dict, chunk_size: int,
                 cameras: Sequence[str], meta: dict | None = None) -> Path:
    """Write weights with what the policy needs to rebuild the network."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {k: v.half() if v.is_floating_point() else v
                               for k, v in state_dict.items()},
                "chunk_size": chunk_size, "cameras": list(cameras), "meta": meta or {}}, path)
    return path


def load_weights(name: str) -> dict:
    """Read weights written by :func:`save_weights` (float32 restored)."""
    import torch

    path = weights_path(name)
    if not path.exists():
        raise FileNotFoundError(f"no weights at {path}; shipped: {sorted(SHIPPED)}")
    blob = torch.load(path, map_location="cpu")
    blob["state_dict"] = {k: v.float() if v.is_floating_point() else v
                          for k, v in blob["state_dict"].items()}
    return blob


def train_shipped_weights(out: str | Path = SHIPPED["bc"], suite: str = "MT10",
                          tasks: Sequence[str] = ("reach-v3", "drawer-close-v3"),
                          episodes: range = range(10, 30), image_size: int = 64,
                          chunk_size: int = 8, stride: int = 5, epochs: int = 40,
                          seed: int = 0) -> tuple[Path, list[float]]:
    """Collect demos and train the weights shipped as ``"bc"``; episodes 0-9 stay held out.

    A few CPU minutes: ``python -m workbench.policies.training``.
    """
    from workbench.benchmarks.metaworld import MetaWorldAdapter

    cameras = ("images.primary", "images.wrist")
    adapter = MetaWorldAdapter(suite, image_size=image_size)
    plan = [EpisodeSpec("metaworld", suite, t, i, i) for t in tasks for i in episodes]
    demos = collect_demos(adapter, plan, cameras, chunk_size, stride)
    adapter.close()
    state_dict, losses = train_behavior_cloning(demos, chunk_size, epochs, seed=seed)
    meta = {"suite": suite, "tasks": list(tasks), "train_episodes": [episodes.start, episodes.stop],
            "image_size": image_size, "stride": stride, "epochs": epochs, "samples": len(demos.targets),
            "final_loss": losses[-1]}
    return save_weights(out, state_dict, chunk_size, cameras, meta), losses


if __name__ == "__main__":
    path, history = train_shipped_weights()
    print(f"wrote {path}; loss {history[0]:.4f} -> {history[-1]:.4f}")
