"""This machine's throughput limit for a workload, measured in pinned single processes.

Two measurements: :func:`measure_step_cost` (CPU seconds per step, and the limit they
imply) and :func:`independent_loops` (the ceiling: several loops on disjoint parts of a
plan at once, with no coordination at all; what a pool's steps/s is compared with).

The limit is the cores divided by the CPU seconds one environment step costs in a
single process: simulation plus the renders and inference it needs, amortized over
the action chunk (chunk-boundary observation, policy in-process, one thread for math
and software rendering). Measured with one process alone (``processes=1``) it is the
definition's limit. Measured with one such process per core running at once
(``processes=cores``) it includes what cores cost each other when all are busy
(shared caches and memory bandwidth, lower all-core clock), and its wall-clock rate is
what fully independent evaluators, with no coordination at all, reach here.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import psutil

from workbench.contracts.capabilities import LoadContext
from workbench.contracts.plan import EpisodeSpec
from workbench.runtime.episode import run_episode, warm_up
from workbench.runtime.job import Components
from workbench.runtime.pool import process_context
from workbench.runtime.replica import pin_threads


@dataclass(frozen=True)
class StepCost:
    """CPU seconds per environment step, and the steps/s limit it implies."""

    steps: int
    cpu_s: float
    cores: int
    processes: int = 1
    wall_s: float = 0.0

    @property
    def cpu_s_per_step(self) -> float:
        return self.cpu_s / max(self.steps, 1)

    @property
    def limit_steps_per_s(self) -> float:
        return self.cores / self.cpu_s_per_step

    @property
    def independent_steps_per_s(self) -> float:
        """Steps per wall second of the processes together (0 if not timed)."""
        return self.steps / self.wall_s if self.wall_s > 0 else 0.0


def _pinned_parts(parts: Components, plan: Sequence[EpisodeSpec]) -> tuple[Any, Any]:
    """In a measuring process: one math and rendering thread, the adapter and the loaded
    policy, every context of ``plan`` built (outside the clock)."""
    pin_threads(1)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    adapter, policy = parts.adapter_factory(), parts.policy_factory()
    policy.load(LoadContext(parts.protocol.name))
    warm_up(adapter, plan, policy.capabilities.features)
    return adapter, policy


def _measure(parts: Components, plan: Sequence[EpisodeSpec], queue: mp.Queue,
             barrier: Any, max_steps: int | None = None) -> None:
    adapter, policy = _pinned_parts(parts, plan)
    barrier.wait()  # all processes start their clocks together
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    steps = sum(run_episode(adapter, policy, spec, observe_every_step=False,
                            max_steps=max_steps).steps for spec in plan)
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
    adapter.close()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    queue.put((steps, cpu, wall))


def measure_step_cost(parts: Components, plan: Sequence[EpisodeSpec],
                      cores: int | None = None, processes: int = 1) -> StepCost:
    """Run ``plan`` in ``processes`` fresh pinned processes at once (each the whole plan)
    and return their CPU cost per step."""
    return _run_loops(parts, [list(plan)] * processes, cores)


def independent_loops(parts: Components, plans: Sequence[Sequence[EpisodeSpec]],
                      cores: int | None = None, max_steps: int | None = None) -> StepCost:
    """Run each of ``plans`` (disjoint parts of one plan) in its own fresh pinned process,
    all at once, with chunk-boundary observation and the policy in-process; environments
    are built before a shared start. ``independent_steps_per_s`` is the steps of all
    processes over the slowest one's wall time: the ceiling of ``len(plans)``
    evaluators that share nothing. Split the plan with :func:`balanced_split` so no loop
    waits on a long tail. ``max_steps`` caps every episode as the config's does."""
    return _run_loops(parts, [list(p) for p in plans], cores, max_steps)


@dataclass(frozen=True)
class StageCost:
    """CPU seconds of one pinned single-thread process running a plan, by stage: the
    simulator's resets (``adapter.reset``, each episode's start), its physics
    (``adapter.step``), observation (``adapter.observe``: the renders
    and the features a policy reads), the policy (``act``), and the harness (the rest of
    the process's CPU: the step loop, records of the episode, Python around it).

    ``bound_steps_per_s`` is ``cores`` over the CPU seconds per step without the harness:
    no evaluator that runs the same physics, renders and policy calls on this machine's
    cores can step faster (it would need cores beyond these, or less work per step)."""

    steps: int
    physics_s: float
    observe_s: float
    policy_s: float
    cpu_s: float
    cores: int
    observe_every_step: bool
    episode_steps: dict[str, int] = field(default_factory=dict)
    """Each episode's steps, by episode id."""
    processes: int = 1
    """How many processes ran the plan at once (each the whole plan)."""
    reset_s: float = 0.0
    """The environments' resets: simulator work every evaluator does once per episode."""

    @property
    def harness_s(self) -> float:
        return max(self.cpu_s - self.work_s, 0.0)

    @property
    def work_s(self) -> float:
        """CPU seconds of the work itself: resets, physics, observation and the policy."""
        return self.reset_s + self.physics_s + self.observe_s + self.policy_s

    @property
    def work_s_per_step(self) -> float:
        return self.work_s / max(self.steps, 1)

    @property
    def bound_steps_per_s(self) -> float:
        return self.cores / self.work_s_per_step

    def per_step(self) -> dict[str, float]:
        """CPU milliseconds per step of each stage."""
        n = max(self.steps, 1)
        return {"reset_ms": 1e3 * self.reset_s / n,
                "physics_ms": 1e3 * self.physics_s / n, "observe_ms": 1e3 * self.observe_s / n,
                "policy_ms": 1e3 * self.policy_s / n, "harness_ms": 1e3 * self.harness_s / n}


class _Timed:
    """Adds the process CPU time of each call of ``method`` of ``target`` to ``totals``
    (process, not thread: software rendering may run on threads of its own)."""

    def __init__(self, target: Any, method: str, totals: dict, key: str) -> None:
        inner = getattr(target, method)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                totals[key] += time.process_time() - start

        setattr(target, method, timed)


def _measure_stages(parts: Components, plan: Sequence[EpisodeSpec], queue: mp.Queue,
                    observe_every_step: bool, max_steps: int | None, barrier: Any) -> None:
    adapter, policy = _pinned_parts(parts, plan)
    totals = {"physics": 0.0, "observe": 0.0, "policy": 0.0, "reset": 0.0}
    _Timed(adapter, "reset", totals, "reset")
    _Timed(adapter, "step", totals, "physics")
    _Timed(adapter, "observe", totals, "observe")
    _Timed(policy, "act", totals, "policy")
    barrier.wait()  # with several processes, all start their clocks together
    before = time.process_time()
    episode_steps = {spec.episode_id: run_episode(
        adapter, policy, spec, observe_every_step=observe_every_step,
        max_steps=max_steps).steps for spec in plan}
    cpu = time.process_time() - before
    adapter.close()
    queue.put((episode_steps, totals["physics"], totals["observe"], totals["policy"], cpu,
               totals["reset"]))


def measure_stages(parts: Components, plan: Sequence[EpisodeSpec],
                   observe_every_step: bool = False, cores: int | None = None,
                   max_steps: int | None = None, processes: int = 1) -> StageCost:
    """Run ``plan`` in fresh pinned single-thread processes (environments built before
    the clock, the policy in-process) and return their CPU seconds by stage
    (:class:`StageCost`) under one rendering schedule: every step, or chunk boundaries
    only.

    ``processes=1``: one process alone, the definition's bound (nothing on these cores
    can do the same work per step for less). ``processes=cores``: that many processes
    at once, each the whole plan, their stage seconds summed (``steps`` counts every
    process's): the work per step when every core is busy, which includes what busy
    cores cost each other (caches, memory bandwidth, clock)."""
    ctx = process_context(parts.preload)
    queue, barrier = ctx.Queue(), ctx.Barrier(processes)
    procs = [ctx.Process(target=_measure_stages, args=(parts, list(plan), queue,
                                                       observe_every_step, max_steps, barrier))
             for _ in range(processes)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=3600) for _ in procs]
    for proc in procs:
        proc.join()
    episode_steps = results[0][0]
    return StageCost(sum(sum(r[0].values()) for r in results),
                     *(sum(r[k] for r in results) for k in range(1, 5)),
                     cores or psutil.cpu_count() or 1, observe_every_step, episode_steps,
                     processes, sum(r[5] for r in results))


def balanced_split(plan: Sequence[EpisodeSpec], steps: dict[str, int], parts: int
                   ) -> list[list[EpisodeSpec]]:
    """Split ``plan`` into ``parts`` disjoint lists of nearly equal total steps (longest
    episode first, each to the lightest list), given each episode's ``steps``.

    >>> from workbench.contracts.plan import plan_episodes
    >>> plan = plan_episodes("metaworld", "MT10", ["reach-v3"], 4)
    >>> steps = dict(zip([s.episode_id for s in plan], [50, 40, 30, 20]))
    >>> [[steps[s.episode_id] for s in part] for part in balanced_split(plan, steps, 2)]
    [[50, 20], [40, 30]]
    """
    lists: list[list[EpisodeSpec]] = [[] for _ in range(parts)]
    load = [0] * parts
    for spec in sorted(plan, key=lambda s: (-steps[s.episode_id], s.episode_id)):
        k = load.index(min(load))
        lists[k].append(spec)
        load[k] += steps[spec.episode_id]
    return lists


def _run_loops(parts: Components, plans: Sequence[list[EpisodeSpec]],
               cores: int | None, max_steps: int | None = None) -> StepCost:
    ctx = process_context(parts.preload)
    queue, barrier = ctx.Queue(), ctx.Barrier(len(plans))
    procs = [ctx.Process(target=_measure, args=(parts, plan, queue, barrier, max_steps))
             for plan in plans]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=3600) for _ in procs]
    for proc in procs:
        proc.join()
    return StepCost(sum(r[0] for r in results), sum(r[1] for r in results),
                    cores or psutil.cpu_count() or 1, len(plans), max(r[2] for r in results))
