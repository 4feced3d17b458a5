"""Candidate policies whose quality order nobody hand-made, for validating judges.

The graded expert ladder adds one designed defect per rung, and the offline judge has
a detector for each, so ranking it proves the plumbing, not the judge. The candidates
here come out of training instead, in three families:

- ``checkpoint``: one behaviour-cloned state MLP (:mod:`workbench.policies.state_bc`)
  saved at several numbers of gradient steps;
- ``data``: the same recipe trained for a fixed number of steps on different numbers
  of demonstrations per task;
- ``nearest``: nearest-neighbour replay of the demonstrations
  (:mod:`workbench.policies.nearest`) with different numbers of demonstrations, a
  policy of another kind.

Demonstrations are scripted-expert episodes run through the runtime's step loop on the
task set of ``demo_seed``; evaluations use another task set (another ``seed``), so no
candidate has seen its evaluation starts. Whether more steps or more data help, and by
how much, is left to the measurement.

>>> CandidateConfig(tasks=("reach-v3",), checkpoint_steps=(10, 20), data_demos=(1,),
...                 nearest_demos=(1,)).names()
['state-bc-ckpt-3demos-10steps', 'state-bc-ckpt-3demos-20steps', 'state-bc-data-1demos-400steps', 'state-nn-1demos']
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from workbench.benchmarks import make_benchmark
from workbench.contracts.plan import EpisodeSpec
from workbench.policies.nearest import save_demo_memory
from workbench.policies.state_bc import STATE_FEATURE, build_state_net, save_state_bc, token_batch
from workbench.studies.training import Demos, collect_demos


@dataclass(frozen=True)
class CandidateConfig:
    """What the candidates are trained from and how (steps are gradient steps)."""

    suite: str = "MT10"
    tasks: tuple[str, ...] = ("reach-v3", "push-v3", "drawer-close-v3",
                              "button-press-topdown-v3", "window-open-v3", "door-open-v3")
    demo_seed: int = 1  # task-set seed of the demonstrations (evaluate on another)
    checkpoint_demos: int = 3  # demos per task behind the checkpoint family
    checkpoint_steps: tuple[int, ...] = (25, 100, 400, 1600)
    data_demos: tuple[int, ...] = (1, 10)  # demos per task of the data family
    data_steps: int = 400
    nearest_demos: tuple[int, ...] = (1, 10)  # demos per task of the nearest family
    chunk_size: int = 4
    width: int = 256
    batch_size: int = 256
    lr: float = 1e-3
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("CandidateConfig.tasks must name at least one task")
        for name in ("checkpoint_steps", "data_demos", "nearest_demos"):
            values = getattr(self, name)
            if any(not isinstance(v, int) or v < 1 for v in values) or \
                    len(set(values)) != len(values):
                raise ValueError(f"CandidateConfig.{name}: expected distinct integers >= 1; "
                                 f"got {values!r}")
        for name in ("checkpoint_demos", "data_steps", "chunk_size", "width", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"CandidateConfig.{name}: expected an integer >= 1; "
                                 f"got {getattr(self, name)!r}")
        if self.checkpoint_demos in self.data_demos:
            raise ValueError(f"data_demos {self.data_demos} repeats checkpoint_demos "
                             f"{self.checkpoint_demos}: that candidate is in the checkpoint family")

    def names(self) -> list[str]:
        """Candidate (policy) names, family by family."""
        return ([f"state-bc-ckpt-{self.checkpoint_demos}demos-{s}steps"
                 for s in self.checkpoint_steps]
                + [f"state-bc-data-{n}demos-{self.data_steps}steps" for n in self.data_demos]
                + [f"state-nn-{n}demos" for n in self.nearest_demos])


def collect_state_demos(config: CandidateConfig, demos_per_task: int) -> list[Demos]:
    """Expert demonstrations of every task on the ``demo_seed`` task set, one
    :class:`Demos` per episode (initial states 0 .. demos_per_task-1), every step kept,
    state = the privileged 39-D observation, targets = the next ``chunk_size`` actions."""
    adapter = make_benchmark("metaworld", suite=config.suite, seed=config.demo_seed,
                             image_size=32)
    try:
        return [collect_demos(adapter, [EpisodeSpec("metaworld", config.suite, task, i, i)],
                              (), config.chunk_size, stride=1, state_key=STATE_FEATURE)
                for task in config.tasks for i in range(demos_per_task)]
    finally:
        adapter.close()


def _subset(episodes: list[Demos], tasks: Sequence[str], per_task: int) -> Demos:
    """The first ``per_task`` episodes of each task, concatenated."""
    total = len(episodes) // len(tasks)
    kept = [episodes[t * total + i] for t in range(len(tasks)) for i in range(per_task)]
    return Demos(np.concatenate([d.images for d in kept]),
                 np.concatenate([d.state for d in kept]),
                 [text for d in kept for text in d.instructions],
                 np.concatenate([d.targets for d in kept]))


def train_state_bc(demos: Demos, config: CandidateConfig, save_at: Sequence[int]
                   ) -> tuple[dict[int, dict], list[float], np.ndarray, np.ndarray]:
    """Train the state MLP for ``max(save_at)`` steps on minibatches drawn with
    replacement; returns the state dict at each step in ``save_at``, the loss per
    step, and the state mean and std used to normalise."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a small MLP: one thread is faster, and spins on no busy core
    try:
        return _train(demos, config, save_at)
    finally:
        torch.set_num_threads(threads)


def _train(demos: Demos, config: CandidateConfig, save_at: Sequence[int]
           ) -> tuple[dict[int, dict], list[float], np.ndarray, np.ndarray]:
    import torch

    torch.manual_seed(config.seed)
    mean, std = demos.state.mean(axis=0), demos.state.std(axis=0) + 1e-6
    state = torch.from_numpy(((demos.state - mean) / std).astype(np.float32))
    targets = torch.from_numpy(demos.targets.astype(np.float32))
    net = build_state_net(state.shape[1], config.chunk_size, targets.shape[2], config.width)
    opt = torch.optim.Adam(net.parameters(), lr=config.lr)
    rng, saved, losses = np.random.default_rng(config.seed), {}, []
    for step in range(1, max(save_at) + 1):
        idx = rng.integers(len(targets), size=min(config.batch_size, len(targets)))
        tokens, offsets = token_batch([demos.instructions[i] for i in idx])
        loss = torch.nn.functional.mse_loss(net(state[idx], tokens, offsets), targets[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if step in save_at:
            saved[step] = {k: v.detach().clone() for k, v in net.state_dict().items()}
    return saved, losses, mean, std


def train_candidates(config: CandidateConfig, out_dir: str | Path) -> pd.DataFrame:
    """Train (or reuse, when ``out_dir/candidates.json`` holds the same config) every
    candidate; one row each: candidate, family, policy, options (for the runner),
    demos_per_task, steps, final_loss, file."""
    out = Path(out_dir)
    manifest = out / "candidates.json"
    if manifest.exists():
        saved = json.loads(manifest.read_text())
        if saved["config"] == json.loads(json.dumps(asdict(config))):
            return pd.DataFrame(saved["candidates"])
    most = max(config.checkpoint_demos, *config.data_demos, *config.nearest_demos)
    episodes = collect_state_demos(config, most)
    rows = _bc_family(config, episodes, "checkpoint", config.checkpoint_demos,
                      config.checkpoint_steps, out)
    for n in config.data_demos:
        rows += _bc_family(config, episodes, "data", n, (config.data_steps,), out)
    for n in config.nearest_demos:
        demos = _subset(episodes, config.tasks, n)
        path = save_demo_memory(out / f"{n}demos.npz", demos.state, demos.targets,
                                demos.instructions, "metaworld-v1", {"demos_per_task": n})
        rows.append({"candidate": f"state-nn-{path.stem}", "family": "nearest",
                     "policy": "state-nn", "options": {"data": str(path)},
                     "demos_per_task": n, "steps": 0, "final_loss": float("nan"),
                     "file": str(path)})
    out.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"config": asdict(config), "candidates": rows}, indent=1))
    return pd.DataFrame(rows)


def _bc_family(config: CandidateConfig, episodes: list[Demos], family: str, per_task: int,
               steps: Sequence[int], out: Path) -> list[dict]:
    """Train one MLP on ``per_task`` demos per task; a row per saved step count."""
    demos = _subset(episodes, config.tasks, per_task)
    saved, losses, mean, std = train_state_bc(demos, config, steps)
    prefix = "ckpt" if family == "checkpoint" else "data"
    rows = []
    for step in steps:
        path = save_state_bc(out / f"{prefix}-{per_task}demos-{step}steps.pt", saved[step],
                             mean, std, config.chunk_size, config.width, "metaworld-v1",
                             {"demos_per_task": per_task, "steps": step})
        rows.append({"candidate": f"state-bc-{path.stem}", "family": family,
                     "policy": "state-bc", "options": {"weights": str(path)},
                     "demos_per_task": per_task, "steps": step,
                     "final_loss": float(np.mean(losses[max(0, step - 10):step])),
                     "file": str(path)})
    return rows
