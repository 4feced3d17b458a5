"""The one road from a config to records: :func:`run`.

``run(config)`` owns plan -> freeze -> recover -> execute -> record for every backend
(``sequential``, ``pool``, ``ray``, ``service``: the names of
:data:`workbench.config.BACKENDS`; the config's ``backend`` picks its executor from
:data:`EXECUTORS`). The CLI, the notebooks, the ranking pipeline, the perf scripts and
Ray all come through here. Running the same config again resumes the same run:
finished episodes are kept and never re-run; an episode left claimed by a crash is
recorded as an infrastructure error, not retried.

>>> import tempfile
>>> out = tempfile.mkdtemp()
>>> result = run({"benchmark": "metaworld", "suite": "MT1:reach-v3", "policy": "expert",
...               "image_size": 32, "output_dir": out, "progress": False})
>>> result.results[["task", "success"]].values.tolist()
[['reach-v3', True]]
>>> run({"benchmark": "metaworld", "suite": "MT1:reach-v3", "policy": "expert",
...      "image_size": 32, "output_dir": out, "progress": False}).report.rows  # resumed
[]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from workbench.config import EvalConfig, as_config
from workbench.contracts.plan import plan_episodes, shard_episodes
from workbench.contracts.rendering import use_headless_rendering
from workbench.records.provenance import run_provenance
from workbench.records.store import RecordStore
from workbench.runtime.episode import EpisodeObserver
from workbench.runtime.handshake import handshake_policy
from workbench.runtime.job import Components, Job, build_components
from workbench.runtime.parallel import execute_pool
from workbench.runtime.pool import EvalPool
from workbench.runtime.ray_backend import RayPool, execute_ray
from workbench.runtime.search import SearchResult, as_dict as search_as_dict
from workbench.runtime.sequential import execute_sequential
from workbench.runtime.sink import RunReport
from workbench.service.driver import execute_service


@dataclass(frozen=True)
class EvalRun:
    """A run's records and what its execution measured.

    results: every episode of the run as stored (earlier invocations included);
    report: this invocation's episodes, timings and resources; search: what the
    concurrency search probed and chose (when it ran; the pool backend's); searches:
    every search of the run (the pool's, or one per Ray shard); e2e_s: seconds of the
    whole call, set-up included.
    """

    config: EvalConfig
    run_id: str
    records_path: Path
    output_dir: Path
    results: pd.DataFrame
    report: RunReport
    search: SearchResult | None
    e2e_s: float
    searches: tuple[SearchResult, ...] = ()

    @property
    def report_path(self) -> Path | None:
        """The run's ``report.html`` in ``output_dir``, once written (``workbench
        report``, ``workbench eval``, or :func:`workbench.reports.report_from_records`);
        None before."""
        page = self.output_dir / "report.html"
        return page if page.is_file() else None

    def _repr_html_(self) -> str:
        """In a notebook: what ran, the per-task summary, and where records and report are."""
        import html
        import os

        from workbench.contracts.display import frame_table, heading
        from workbench.contracts.results import summarize

        finished = self.results[self.results["status"].eq("finished")]
        now = len(self.report.rows)
        detail = (f"run {self.run_id}: {len(finished)} of {len(self.results)} episodes "
                  f"recorded, {now} in this call ({self.report.backend}, "
                  f"{self.e2e_s:.1f} s)" if now else
                  f"run {self.run_id}: all {len(finished)} episodes already recorded; nothing "
                  "ran in this call")
        report = self.report_path
        where = (f"<a href='{html.escape(os.path.relpath(report))}' target='_blank'>report</a>"
                 if report else f"no report yet (<code>workbench report "
                 f"{html.escape(str(self.records_path))}</code>)")
        return (heading("EvalRun", detail)
                + (frame_table(summarize(self.results)) if len(self.results) else "")
                + f"<p>records <code>{html.escape(str(self.records_path))}</code> &middot; "
                f"{where}</p>")


def _sequential(job: Job, pool: EvalPool | None,
                observers: Sequence[EpisodeObserver]) -> tuple[RunReport, None]:
    if pool is not None:
        raise ValueError("backend sequential runs in this process; a pool was passed")
    return execute_sequential(job, observers), None


def _pool(job: Job, pool: EvalPool | RayPool | None,
          observers: Sequence[EpisodeObserver]) -> tuple[RunReport, SearchResult | None]:
    _no_observers("pool", observers)
    if isinstance(pool, RayPool):
        raise ValueError("backend pool runs local processes; a Ray pool was passed")
    return execute_pool(job, pool)


def _ray(job: Job, pool: EvalPool | RayPool | None,
         observers: Sequence[EpisodeObserver]) -> tuple[RunReport, None]:
    _no_observers("ray", observers)
    if pool is not None and not isinstance(pool, RayPool):
        raise ValueError("backend ray runs on Ray actors; a local pool was passed (use "
                         "open_ray_pool for a warm one)")
    return execute_ray(job, pool), None


def _no_observers(backend: str, observers: Sequence[EpisodeObserver]) -> None:
    if observers:
        raise ValueError(f"episode observers run in-process: use backend sequential, not "
                         f"{backend}")


def _service(job: Job, pool: EvalPool | None,
             observers: Sequence[EpisodeObserver]) -> tuple[RunReport, None]:
    _no_observers("service", observers)
    if pool is not None:
        raise ValueError("backend service steps the benchmark in a SIM service; a local pool "
                         "was passed")
    return execute_service(job), None


Backend = Callable[[Job, EvalPool | RayPool | None, Sequence[EpisodeObserver]],
                   tuple[RunReport, SearchResult | None]]
EXECUTORS: dict[str, Backend] = {"sequential": _sequential, "pool": _pool, "ray": _ray,
                                 "service": _service}
"""How each backend named in :data:`workbench.config.BACKENDS` executes a job."""


def run(config: EvalConfig | Mapping[str, Any], *, pool: EvalPool | RayPool | None = None,
        observers: Sequence[EpisodeObserver] = ()) -> EvalRun:
    """Plan, freeze and execute ``config`` (an :class:`EvalConfig` or its mapping).

    pool: a warm pool to run on instead of starting one (from :func:`open_pool` for
    backend pool, :func:`open_ray_pool` for backend ray); observers: watchers of every
    episode's step loop (backend sequential). The policy is checked against the
    benchmark before anything is claimed. A folder holding a campaign is refused: its
    cases are claimed only through :meth:`~workbench.campaigns.Campaign.run`.
    """
    return execute(config, pool=pool, observers=observers)


def execute(config: EvalConfig | Mapping[str, Any], *, pool: EvalPool | RayPool | None = None,
            observers: Sequence[EpisodeObserver] = (), campaign: str | None = None,
            before_claim: Callable[[], None] | None = None) -> EvalRun:
    """:func:`run`, for a campaign: ``campaign`` names the campaign whose cases the
    folder holds (its run), ``before_claim`` re-checks its frozen sources before every
    claim (raising stops the run)."""
    start = time.perf_counter()
    use_headless_rendering()
    config = as_config(config)
    parts = build_components(config)
    out = Path(config.output_dir)
    store = RecordStore(out / "records.sqlite")
    try:
        held = store.campaign_ids()
        if held and (campaign not in held or config.resolved_run_id() != campaign):
            raise ValueError(f"{out} holds campaign {held[0]!r}: its cases are claimed only "
                             f"by `workbench campaign run {out}` (a new run id is not "
                             "permission to repeat them); evaluate elsewhere in another "
                             "folder")
        job = _freeze(config, parts, store, before_claim)
        handshake_policy(job)
        report, search = EXECUTORS[config.backend](job, pool, observers)
        searches = (search,) if search is not None else tuple(report.searches)
        for found in searches:
            store.record_search(job.run_id, search_as_dict(found))
        results = store.results(job.run_id)
    finally:
        store.close()
    return EvalRun(config, job.run_id, store.path, out, results, report, search,
                   time.perf_counter() - start, searches)


def _freeze(config: EvalConfig, parts: Components, store: RecordStore,
            before_claim: Callable[[], None] | None = None) -> Job:
    plan = plan_episodes(config.benchmark_class.name, config.suite, config.task_names(),
                         config.episodes)
    plan = shard_episodes(plan, config.shards, config.shard)
    run_id = store.create_run(config.resolved_run_id(), plan, config.to_dict(),
                              policy=parts.policy_name, diagnostic=parts.capabilities.privileged,
                              provenance=run_provenance(config))
    store.recover(run_id)  # a crashed earlier attempt: recorded, never retried
    return Job(config, parts, plan, store, run_id, before_claim)


def open_pool(config: EvalConfig | Mapping[str, Any], max_workers: int | None = None,
              max_replicas: int | None = None) -> EvalPool:
    """A warm pool for ``config``'s benchmark and policy, to pass to several :func:`run`
    calls (a sweep, probes). It starts the config's pool section's workers and replicas
    and grows, as runs ask for more, up to ``max_workers`` x ``max_replicas`` (default:
    the pool section). Close it (or use it in ``with``) when done."""
    use_headless_rendering()
    config = as_config(config)
    limits = (max_workers or config.pool.workers, max_replicas or config.pool.replicas)
    return EvalPool(build_components(config), min(config.pool.workers, limits[0]),
                    min(config.pool.replicas, limits[1]), limits=limits)


def open_ray_pool(config: EvalConfig | Mapping[str, Any]) -> RayPool:
    """Warm Ray actors for ``config``'s benchmark and policy: ``ray.shards`` placement
    groups of ``pool.workers`` worker and ``pool.replicas`` replica actors, started once
    and reused by every :func:`run` given this pool (backend ray) that asks for at most
    as many. Starts Ray locally when no cluster is connected. Close it (or use it in
    ``with``) when done."""
    use_headless_rendering()
    config = as_config(config)
    return RayPool(config, build_components(config))
