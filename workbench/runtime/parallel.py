"""The pool backend: a plan on simulator workers and policy replicas (``backend: pool``)."""

from __future__ import annotations

import time
from typing import Callable, Sequence

import psutil

from workbench.config import EvalConfig
from workbench.contracts.plan import EpisodeSpec
from workbench.runtime.job import Components, Job
from workbench.runtime.pool import EvalPool, mean_steps_per_task
from workbench.runtime.search import (CountedProbes, SearchResult, search_concurrency,
                                      search_pool)
from workbench.runtime.sink import RecordSink, RunReport


def start_pool(parts: Components, config: EvalConfig) -> EvalPool:
    """A pool for ``config``: its pool section's size; with the search, one replica and
    the second probe's workers (:func:`~workbench.runtime.search.workers_to_start`), which
    the search grows up to its limits."""
    if config.search.enabled:
        return search_pool(parts, config.search, psutil.cpu_count() or 1)
    return EvalPool(parts, config.pool.workers, config.pool.replicas)


def prepare_pool(pool: EvalPool, config: EvalConfig, plan: Sequence[EpisodeSpec],
                 pending: Callable[[], Sequence[EpisodeSpec]],
                 counted: CountedProbes | None = None) -> SearchResult | None:
    """Configure ``pool`` for ``config``: its observation schedule, then the search's
    choice (probing episodes of ``plan``, recorded as the run's with ``counted``) or the
    pool section, then, with ``warm_up``, the environments of the episodes still
    ``pending`` (asked after the search, whose counted probes may have run some).
    Returns the search's result, if any."""
    pool.observe_every_step = config.observe_every_step
    search = (search_concurrency(pool, plan, config.search, config.pool.max_wait_ms,
                                 max_steps=config.max_steps, counted=counted)
              if config.search.enabled else None)
    pool.configure(search.best if search else config.pool, config.observe_every_step)
    left = pending()
    if config.warm_up and left:
        pool.warm_up(left)
    return search


def expected_steps(job: Job, search: SearchResult | None) -> dict[str, float]:
    """Steps per task to expect, for longest-first dispatch: the mean over this run's
    episodes already recorded (an earlier, interrupted attempt of it, or of its
    campaign) and the search's probe episodes. Empty when neither exists (the plan's
    order then stands)."""
    done = job.store.results(job.run_id)
    rows = [] if done.empty else done[done["status"].eq("finished")].to_dict("records")
    probes = [{"task": t, "steps": s, "error_kind": None}
              for t, s in (search.task_steps if search else {}).items()]
    return mean_steps_per_task(rows + probes)


def execute_pool(job: Job, pool: EvalPool | None = None
                 ) -> tuple[RunReport, SearchResult | None]:
    """Run ``job``'s pending episodes on a pool: ``pool`` when given (kept warm for the
    caller), else one sized by the config (its pool section, or the search's limits),
    closed at the end. With ``search.enabled`` the concurrency search picks the
    configuration first. Returns the run's report and the search's result."""
    start, config = time.perf_counter(), job.config
    if pool is not None and (pool.parts.adapter_factory, pool.parts.policy_factory) != (
            job.parts.adapter_factory, job.parts.policy_factory):
        raise ValueError("the pool passed to run() was opened for another benchmark or policy "
                         f"({pool.parts.policy_name}); open one for this config")
    own = pool is None
    if own:
        pool = start_pool(job.parts, config)
    sink = job.sink(f"{job.parts.policy_name} on {config.suite} (pool)")
    try:
        counted = (CountedProbes(lambda: RecordSink(job.store, job.run_id,
                                                      before_claim=job.before_claim),
                                 job.episode_options(), frozenset(job.videos()))
                   if job.parts.capabilities.runtime_invariant else None)
        search = prepare_pool(pool, config, job.plan, lambda: sink.pending(job.plan),
                              counted)
        setup_s = time.perf_counter() - start
        report = pool.run(job.plan, sink, job.episode_options(), job.videos(),
                          expected_steps=expected_steps(job, search))
    finally:
        sink.close()
        if own:
            pool.close()
    report.setup_s = setup_s
    return report, search
