"""The sequential backend: the official-like reference loop, in the calling process.

One environment, one policy, episodes one after another; by default an observation
read at every step at the benchmark's default quality. Every speedup is measured
against it, so it stays simple: no pools, no reordering. Observers
(:class:`~workbench.runtime.episode.EpisodeObserver`) attach here, in-process.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Sequence

from workbench.contracts.capabilities import LoadContext
from workbench.contracts.results import load_blamed_on
from workbench.runtime.resources import ResourceMonitor
from workbench.runtime.episode import EpisodeObserver, run_recorded_episode, warm_up
from workbench.runtime.guard import GuardedPolicy, release, unreachable
from workbench.runtime.job import Job
from workbench.runtime.sink import RunReport


def execute_sequential(job: Job, observers: Sequence[EpisodeObserver] = ()) -> RunReport:
    """Run ``job``'s pending episodes one by one in this process; returns what it measured."""
    start = time.perf_counter()
    adapter = job.parts.adapter_factory()
    policy = GuardedPolicy(job.parts.policy_factory(), job.config.policy_call_timeout_s)
    sink = job.sink(f"{job.parts.policy_name} on {adapter.name}")
    failures: list[str] = []
    try:
        with load_blamed_on(job.parts.policy_name):
            policy.load(LoadContext(job.parts.protocol.name, device=job.parts.device))
        todo = sink.pending(job.plan)
        if job.config.warm_up:
            warm_up(adapter, todo, job.parts.capabilities.features)
        setup_s, videos, options = time.perf_counter() - start, job.videos(), job.episode_options()
        with ResourceMonitor([os.getpid()], interval_s=0.5, children=False,
                             gpu_index=None) as monitor:
            for spec in todo:
                gone = unreachable(policy)
                if gone is not None:  # nothing claimed while the policy's server is gone
                    failures.append(gone)
                    break
                if sink.claim(spec, "sequential"):
                    film = replace(options, video=spec.episode_id in videos)
                    result = run_recorded_episode(adapter, policy, spec, film, observers)
                    sink.finish(spec, result, "sequential")
    finally:
        sink.close()
        adapter.close()
        release(policy)
    usage = monitor.result
    return RunReport("sequential", None, sink.rows, usage.wall_s, usage.cores_busy,
                     usage.peak_rss_bytes, setup_s, complete=not failures, failures=failures)
