"""The pool backend: a plan on simulator workers and policy replicas (``backend: pool``)."""

from __future__ import annotations

import time

import psutil

from workbench.runtime.job import Job
from workbench.runtime.pool import EvalPool
from workbench.runtime.search import SearchResult, search_concurrency
from workbench.runtime.sink import RunReport


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
        cores = psutil.cpu_count() or 1
        size = (config.search.pool_limits(cores) if config.search.enabled
                else (config.pool.workers, config.pool.replicas))
        pool = EvalPool(job.parts, *size)
    sink = job.sink(f"{job.parts.policy_name} on {config.suite} (pool)")
    try:
        pool.observe_every_step = config.observe_every_step
        search = (search_concurrency(pool, job.plan, config.search, config.pool.max_wait_ms,
                                     max_steps=config.max_steps)
                  if config.search.enabled else None)
        pool.configure(search.best if search else config.pool, config.observe_every_step)
        if config.warm_up:
            pool.warm_up(sink.pending(job.plan))
        setup_s = time.perf_counter() - start
        report = pool.run(job.plan, sink, job.run_id, str(job.output_dir), job.videos(),
                          max_steps=config.max_steps)
    finally:
        sink.close()
        if own:
            pool.close()
    report.setup_s = setup_s
    return report, search
