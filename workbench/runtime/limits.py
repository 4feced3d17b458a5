"""This machine's throughput limit for a workload, measured in one pinned process.

The limit is the cores divided by the CPU seconds one environment step costs in a
single process: simulation plus the renders and inference it needs, amortized over
the action chunk (chunk-boundary observation, policy in-process, one thread for math
and software rendering). No multi-process runtime can beat it on this machine.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
from dataclasses import dataclass
from typing import Callable, Sequence

import psutil

from workbench.benchmarks.base import BenchmarkAdapter
from workbench.plan import EpisodeSpec
from workbench.policies.base import LoadContext, Policy
from workbench.runtime.pool import process_context


@dataclass(frozen=True)
class StepCost:
    """CPU seconds per environment step, and the steps/s limit it implies."""

    steps: int
    cpu_s: float
    cores: int

    @property
    def cpu_s_per_step(self) -> float:
        return self.cpu_s / max(self.steps, 1)

    @property
    def limit_steps_per_s(self) -> float:
        return self.cores / self.cpu_s_per_step


def _measure(make_adapter: Callable[[], BenchmarkAdapter], make_policy: Callable[[], Policy],
             plan: Sequence[EpisodeSpec], queue: mp.Queue) -> None:
    from workbench.runtime.episode import run_episode, warm_up
    from workbench.runtime.replica import pin_threads

    pin_threads(1)
    import torch

    torch.set_num_threads(1)
    adapter, policy = make_adapter(), make_policy()
    policy.load(LoadContext(adapter.protocol.name))
    warm_up(adapter, plan, policy.capabilities.features)  # build contexts outside the clock
    before = resource.getrusage(resource.RUSAGE_SELF)
    steps = sum(run_episode(adapter, policy, spec, observe_every_step=False)[0].steps
                for spec in plan)
    after = resource.getrusage(resource.RUSAGE_SELF)
    adapter.close()
    queue.put((steps, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)))


def measure_step_cost(make_adapter: Callable[[], BenchmarkAdapter],
                      make_policy: Callable[[], Policy], plan: Sequence[EpisodeSpec],
                      cores: int | None = None) -> StepCost:
    """Run ``plan`` in one fresh pinned process and return its CPU cost per step."""
    ctx = process_context()
    queue = ctx.Queue()
    proc = ctx.Process(target=_measure, args=(make_adapter, make_policy, list(plan), queue))
    proc.start()
    steps, cpu_s = queue.get(timeout=3600)
    proc.join()
    return StepCost(steps, cpu_s, cores or psutil.cpu_count() or 1)
