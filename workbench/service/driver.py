"""The service backend: the one runner's episodes, stepped in a SIM service.

``backend: service`` with ``service.url`` runs the policy here, in the trusted driver,
and the benchmark in a ``workbench serve`` process (this machine or another), through
:class:`~workbench.service.sim_client.RemoteAdapter`. Episodes go through the same
step loop and the same records as a local run, so the same cases give the same
outcomes for a deterministic policy. The policy owns its chunk length and when it
replans; the loop sends each control as its own step request.

Before anything is claimed the driver joins the service and checks that it serves
the config's benchmark, suite and protocol and schedules every planned case; a
service it cannot reach claims nothing. A service lost mid-episode makes that
episode an infrastructure error; the run then stops, leaving the rest unattempted.
The service attempts each case once too, and remembers it across restarts; a case the
records retry on the user's explicit request (a campaign's ``--retry``) gets a ticket
with the admin's ``retry`` flag, which the service grants only to a case whose session
was abandoned or failed.

Before each case the driver reconciles with the service: a case the service finished
but these records never saw finish (the driver died between the two) is recorded from
the service's score, not run again; a case the service holds as attempted otherwise is
recorded as an interrupted infrastructure error (retry it explicitly), never started.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import replace

from workbench.contracts.capabilities import LoadContext
from workbench.contracts.plan import EpisodeSpec
from workbench.runtime.resources import ResourceMonitor
from workbench.contracts.results import TERMINATIONS, EpisodeResult, ErrorKind, \
    InfrastructureError
from workbench.records.media import episode_filename
from workbench.runtime.episode import run_recorded_episode
from workbench.runtime.guard import GuardedPolicy, release, unreachable
from workbench.runtime.job import Job
from workbench.runtime.sink import RunReport
from workbench.service.sim_client import ArtifactMismatch, RemoteAdapter, ServiceError


def remote_adapter(job: Job) -> RemoteAdapter:
    """A :class:`RemoteAdapter` for ``job``, joined and checked against its config."""
    config = job.config
    token = os.environ.get(config.service.token_env)
    if not token:
        raise ValueError(f"backend service needs the SIM service's admin token in "
                         f"${config.service.token_env} (the driver reads scores with it)")
    local = config.benchmark_class
    caps = job.parts.capabilities
    hidden = [f for f in caps.features if f not in local.protocol.feature_names]
    if hidden:
        raise ValueError(f"policy {job.parts.policy_name!r} reads {hidden}, which a SIM "
                         "service never serves (only declared public features cross the "
                         "wire); use a local backend for privileged diagnostics")
    adapter = RemoteAdapter(config.service.url, local.protocol, local.name, config.suite,
                            local.max_steps, job.parts.capabilities.features, token,
                            config.service.timeout_s,
                            # the observation rides on the ack whenever the loop will read it
                            eager=config.observe_every_step or caps.chunk_size == 1)
    try:
        welcome = adapter.connect()
    except (ServiceError, InfrastructureError) as exc:  # a setup problem: nothing claimed
        raise ValueError(f"SIM service at {config.service.url} cannot be joined: {exc}") \
            from None
    spec = welcome["spec"]
    served = (welcome["benchmark"], welcome["suite"], spec["protocol"],
              spec["action"]["dim"], spec["action"]["dtype"])
    wanted = (local.name, config.suite, local.protocol.name, local.protocol.action.dim,
              local.protocol.action.dtype)
    if served != wanted:
        adapter.close()
        raise ValueError(f"SIM service at {config.service.url} serves {served}, the config "
                         f"asks for {wanted} (benchmark, suite, protocol, action dim, dtype)")
    if not welcome["admin"]:
        adapter.close()
        raise ValueError(f"SIM service at {config.service.url} refused the admin token")
    missing = sorted({s.episode_id for s in job.plan} - set(welcome["schedule"]))
    if missing:
        adapter.close()
        raise ValueError(f"SIM service at {config.service.url} does not schedule "
                         f"{len(missing)} planned cases, e.g. {missing[0]!r}; serve the same "
                         "suite, tasks and episodes")
    adapter.max_steps = int(spec["max_steps"])
    return adapter


def execute_service(job: Job) -> RunReport:
    """Run ``job``'s pending episodes against the SIM service; returns what it measured."""
    start = time.perf_counter()
    adapter = remote_adapter(job)
    policy = GuardedPolicy(job.parts.policy_factory(), job.config.policy_call_timeout_s)
    sink = job.sink(f"{job.parts.policy_name} on {adapter.url}")
    failures: list[str] = []
    try:
        policy.load(LoadContext(job.parts.protocol.name, device=job.parts.device))
        todo = sink.pending(job.plan)
        setup_s, videos, options = time.perf_counter() - start, job.videos(), job.episode_options()
        with ResourceMonitor([os.getpid()], interval_s=0.5, children=False,
                             gpu_index=None) as monitor:
            for spec in todo:
                try:
                    adapter.connect()
                except InfrastructureError as exc:  # nothing claimed while it is gone
                    failures.append(str(exc))
                    break
                gone = unreachable(policy)
                if gone is not None:
                    failures.append(gone)
                    break
                if not sink.claim(spec, "service"):
                    continue
                # an explicit retry (campaign --retry) asks the service to run the case again
                adapter.retrying = job.store.attempt(job.run_id, spec.episode_id) > 1
                try:
                    result = reconciled(adapter, spec)
                except InfrastructureError as exc:
                    result = EpisodeResult.failed(ErrorKind.INFRASTRUCTURE, str(exc))
                if result is None:
                    result = run_recorded_episode(adapter, policy, spec, replace(options,
                                                                                 video=False))
                if spec.episode_id in videos and result.error_kind is None:
                    path, problem = _fetch_video(adapter, job, spec)
                    result = replace(result, video_path=path)
                    failures += [problem] if problem else []
                sink.finish(spec, result, "service")
    finally:
        sink.close()
        adapter.close()
        release(policy)
    usage = monitor.result
    return RunReport("service", None, sink.rows, usage.wall_s, usage.cores_busy,
                     usage.peak_rss_bytes, setup_s, complete=not failures, failures=failures)


def reconciled(adapter: RemoteAdapter, spec: EpisodeSpec) -> EpisodeResult | None:
    """What the service already holds for ``spec``: None when it may run now (never
    attempted, or an abandoned or failed case retried explicitly), else its outcome."""
    score = adapter._call("score", case=spec.episode_id)
    state = score["state"]
    if state == "unattempted" or (adapter.retrying and state in ("abandoned", "error")):
        return None
    if state == "done":  # it ran to its end; the records lost it (the driver died)
        termination = "success" if score["success"] else score["termination"]
        return EpisodeResult(bool(score["success"]), score["terminal_step"],
                             int(score["steps"]), 0.0, rejections=int(score["rejections"]),
                             termination=termination if termination in TERMINATIONS
                             else "policy_stop")
    return EpisodeResult.failed(
        ErrorKind.INFRASTRUCTURE,
        f"interrupted: the SIM service holds {spec.episode_id} as {state} (attempt "
        f"{score['attempts']}) and these records have no outcome for it; it is not run "
        "again unless retried explicitly (campaign run --retry)")


def _fetch_video(adapter: RemoteAdapter, job: Job,
                 spec: EpisodeSpec) -> tuple[str | None, str | None]:
    """(path, problem): the service's video of ``spec`` downloaded and hash-checked, or
    why not. A video that fails its check is reported, never fetched again; the
    episode's outcome stands either way."""
    try:
        entries = adapter.client.request("artifacts")["artifacts"]
        entry = next((e for e in entries if e["case"] == spec.episode_id), None)
        if entry is None:
            return None, None
        target = job.output_dir / "videos" / (episode_filename(spec.episode_id, job.run_id)
                                              + ".mp4")
        return str(adapter.client.fetch_artifact(entry, target)), None
    except (ServiceError, InfrastructureError, ArtifactMismatch) as exc:
        warnings.warn(f"video of {spec.episode_id}: {exc}", stacklevel=2)
        return None, f"video of {spec.episode_id}: {exc}"
