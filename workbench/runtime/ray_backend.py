"""Beyond one machine: simulator workers and policy replicas as Ray actors.

The runner has already frozen the plan in the driver's records file. This backend
splits it with :func:`~workbench.contracts.plan.shard_episodes` (so every episode's
outcome depends only on its identity, not on the shard, actor or machine) and gives
each shard a placement group (``PACK``: its workers and replicas sit together, on one
node where one fits) holding ``pool.workers`` worker actors and ``pool.replicas``
replica actors. Shards spread over the cluster's nodes and GPUs as Ray places their
groups.

- A **worker actor** keeps its benchmark adapter for its life and runs one episode per
  call with :func:`~workbench.runtime.episode.run_recorded_episode`, the step loop every
  backend runs; it asks its replica for actions.
- A **replica actor** loads the policy once and batches the act requests of its
  shard's workers dynamically (up to the batch size, or ``pool.max_wait_ms``), serving
  them with the pool's own :func:`~workbench.runtime.replica.act_isolated`, so one
  episode's fault stays its own and an out-of-memory error is an infrastructure error.
- **Resources**: a shard asks for ``ray.cpus_per_shard`` CPUs (default ``pool.workers``)
  split evenly over its actors; a replica asks for ``ray.gpus_per_replica`` GPUs
  (default, with ``device: cuda``, one GPU per shard shared by its replicas; none on a
  CPU device). Shards that the cluster cannot hold all at once are refused before any
  episode is claimed.
- **Search per shard**: with ``search.enabled`` each shard first runs the concurrency
  search on its own (a search actor in a group of ``ray.cpus_per_shard`` CPUs, default
  the cluster's CPUs over the shards, plus the shard's GPU), with the rules reading that
  shard's cores and GPU, on a local pool inside the actor; then the shard starts the
  workers and replicas its search chose. These probes re-run episodes of the shard and
  discard them (the records are the driver's), and each search is recorded with its
  shard.
- **The driver** claims an episode when it hands it to an idle worker of its shard and
  records each result as soon as it arrives, so a driver that dies loses only the
  episodes in flight (recorded as interrupted when the run is resumed, never re-run).
  An actor that dies fails its episode as an infrastructure error (not retried); the
  shard goes on with its other workers. A shard left with none (its node died) hands
  its episodes not yet started to the shards still alive (an episode's outcome does not
  depend on its shard); with no shard alive they are recorded as infrastructure errors.

Start a cluster the usual Ray way (``ray start --head`` on one machine,
``ray start --address=HEAD:6379`` on the others) and set ``ray.address: auto`` (or pass
``--set ray.address=HOST:6379``); with no address a local Ray instance is started.
Records stay on the driver; rollout files and videos are written to ``output_dir`` as
seen from the node that ran the episode (a folder shared by the hosts, or set
``output_dir`` to one).
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from workbench.config import EvalConfig
from workbench.contracts.capabilities import Capabilities, EpisodeContext, LoadContext
from workbench.contracts.plan import EpisodeSpec, shard_episodes
from workbench.contracts.registry import adopt_sys_path
from workbench.contracts.rendering import use_headless_rendering
from workbench.contracts.results import (EpisodeResult, InfrastructureError, PolicyLoadFailed,
                                         PolicyTimeout)
from workbench.runtime.episode import EpisodeOptions, run_recorded_episode, warm_up
from workbench.runtime.job import Job
from workbench.runtime.parallel import expected_steps
from workbench.runtime.pool import longest_first
from workbench.runtime.replica import (act_isolated, lifecycle_reply, load_policy, pin_threads,
                                       release)
from workbench.runtime.search import SearchResult, search_concurrency, search_pool
from workbench.runtime.sink import RunReport
from workbench.runtime.worker import unpack_reply


class ReplicaActor:
    """One policy replica; ``act`` calls from many workers are served in batches."""

    def __init__(self, factory: Any, context: LoadContext, sys_path: Sequence[str],
                 max_batch: int, max_wait_ms: float) -> None:
        pin_threads(1)
        adopt_sys_path(sys_path)
        self.max_wait_s = max_wait_ms / 1000.0
        self.pending: list[tuple[Any, asyncio.Future]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.sizes: list[int] = []
        # a policy that did not load leaves the actor up to say so (load_failed): the
        # driver stops the run before any claim
        self.policy, self.load_failure = load_policy(factory, context)
        self.max_batch = max(1, min(max_batch, self.policy.capabilities.max_batch)
                             ) if self.policy is not None else 1

    async def ready(self) -> bool:
        return True

    async def load_failed(self) -> str | None:
        """The policy's error when it did not load (the actor then serves nothing)."""
        return self.load_failure

    async def reset(self, context: EpisodeContext) -> tuple[str, Any]:
        return lifecycle_reply(self.policy.reset, writable(context))

    async def end(self, episode_id: str) -> tuple[str, Any]:
        return lifecycle_reply(self.policy.end_episode, episode_id)

    async def act(self, observation: Any) -> tuple[str, Any]:
        future = asyncio.get_running_loop().create_future()
        self.pending.append((writable(observation), future))
        if len(self.pending) >= self.max_batch:
            self._serve()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.max_wait_s, self._serve)
        return await future

    async def release(self) -> bool:
        """End open episodes and unload the policy (before the actor is killed)."""
        if self.policy is not None:
            release(self.policy)
        return True

    async def take_batch_sizes(self) -> list[int]:
        """The batch sizes served since the last call (one run's, in a warm pool)."""
        sizes, self.sizes = self.sizes, []
        return sizes

    def _serve(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch, self.pending = self.pending[:self.max_batch], self.pending[self.max_batch:]
        if not batch:
            return
        self.sizes.append(len(batch))
        for (_, future), reply in zip(batch, act_isolated(self.policy, [o for o, _ in batch])):
            future.set_result(reply)
        if self.pending:
            self.timer = asyncio.get_running_loop().call_later(self.max_wait_s, self._serve)


def writable(value: Any) -> Any:
    """``value`` with every read-only numpy array in it copied. Ray hands arguments and
    results over as read-only views of its object store, where the pool's pipes give
    private copies; policies and adapters may write into what they receive (MetaWorld's
    scripted policies shift positions of the observation in place), so every backend
    gives them writable arrays.

    >>> import numpy as np
    >>> frozen = np.zeros(2)
    >>> frozen.flags.writeable = False
    >>> writable({"state": frozen, "n": [frozen, 1]})["state"].flags.writeable
    True
    """
    import numpy as np

    if isinstance(value, np.ndarray):
        return value if value.flags.writeable else value.copy()
    if isinstance(value, dict):
        return {k: writable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(writable(v) for v in value)
    return value


class _ReplicaProxy:
    """Stands in for a Policy inside a worker actor; forwards calls to a replica actor."""

    def __init__(self, capabilities: Capabilities, replica: Any) -> None:
        self.capabilities, self.replica, self.name = capabilities, replica, "ray-replica"
        self.timeout_s: float | None = None

    def reset(self, context: EpisodeContext) -> None:
        self._call(self.replica.reset, context)

    def act(self, observation: Any) -> Any:
        return self._call(self.replica.act, observation)

    def end_episode(self, episode_id: str) -> None:
        self._call(self.replica.end, episode_id)

    def _call(self, method: Any, payload: Any) -> Any:
        import ray

        try:
            status, value = ray.get(method.remote(payload), timeout=self.timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise PolicyTimeout(f"the policy's call did not return within {self.timeout_s:g} s "
                                "(policy_call_timeout_s)") from None
        except ray.exceptions.RayActorError as exc:
            raise InfrastructureError(f"policy replica actor died ({type(exc).__name__})") \
                from None
        return unpack_reply(status, writable(value), "the replica actor")


class WorkerActor:
    """One simulator worker: its adapter lives as long as the actor."""

    def __init__(self, adapter_factory: Any, capabilities: Capabilities, replica: Any,
                 sys_path: Sequence[str]) -> None:
        pin_threads(1)
        use_headless_rendering()
        adopt_sys_path(sys_path)
        self.adapter = adapter_factory()
        self.policy = _ReplicaProxy(capabilities, replica)

    def ready(self) -> bool:
        return True

    def warm_up(self, specs: Sequence[EpisodeSpec]) -> float:
        return warm_up(self.adapter, specs, self.policy.capabilities.features)

    def run(self, spec: EpisodeSpec, options: EpisodeOptions) -> EpisodeResult:
        self.policy.timeout_s = options.call_timeout_s
        return run_recorded_episode(self.adapter, self.policy, spec, options)


class SearchActor:
    """One shard's concurrency search, on the node and resources Ray gave the shard: a
    local pool grown by the search inside this actor's group, closed at the end."""

    def __init__(self, parts: Any, sys_path: Sequence[str]) -> None:
        use_headless_rendering()
        adopt_sys_path(sys_path)
        self.parts = parts

    def search(self, plan: Sequence[EpisodeSpec], config: EvalConfig, cores: int,
               shard: int) -> SearchResult:
        settings = config.search
        with search_pool(self.parts, settings, cores) as pool:
            pool.observe_every_step = config.observe_every_step
            result = search_concurrency(pool, plan, settings, config.pool.max_wait_ms,
                                        cores=cores, max_steps=config.max_steps)
        result.shard = shard
        return result


@dataclass
class _Actors:
    """One shard's placement group and actors (worker ``w`` asks replica ``w % R``)."""

    index: int
    group: Any = None
    workers: list[Any] = field(default_factory=list)
    replicas: list[Any] = field(default_factory=list)
    names: list[str] = field(default_factory=list)


@dataclass
class _Shard:
    """One shard's part of a run: its queue, and which of its workers are idle."""

    index: int
    queue: deque
    actors: _Actors | None = None
    idle: list[int] = field(default_factory=list)

    @property
    def workers(self) -> list[Any]:
        return self.actors.workers if self.actors else []

    @property
    def replicas(self) -> list[Any]:
        return self.actors.replicas if self.actors else []


class RayPool:
    """Shards of worker and replica actors kept warm across runs (a ladder, a sweep):
    pass it to :func:`workbench.run` with ``backend: ray``; a run uses the first
    ``ray.shards`` shards and the first ``pool.workers`` workers of each (its
    ``pool.replicas`` must equal the pool's). Built by :func:`workbench.open_ray_pool`;
    close it (or use it in ``with``) when done. ``setup_s``: seconds to place the groups
    and start every actor."""

    def __init__(self, job_config: EvalConfig, parts: Any) -> None:
        ray = ensure_ray(job_config.ray.address)
        start = time.perf_counter()
        self.config, self.parts = job_config, parts
        self.shards = job_config.ray.shards
        self.workers, self.replicas = job_config.pool.workers, job_config.pool.replicas
        self.token = uuid.uuid4().hex[:8]
        _check_fits(ray, job_config, parts.device, self.shards)
        self.actors = [_place(ray, job_config, parts, k, f"pool-{self.token}")
                       for k in range(self.shards)]
        self.setup_s = time.perf_counter() - start

    def check(self, config: EvalConfig, parts: Any) -> None:
        """Refuse a run this pool cannot serve, naming what differs."""
        wrong = [(what, have, want) for what, have, want in (
            ("benchmark", self.config.benchmark, config.benchmark),
            ("policy", self.parts.policy_name, parts.policy_name),
            ("policy_options", self.config.policy_options, config.policy_options),
            ("image_size", self.config.image_size, config.image_size),
            ("device", self.parts.device, parts.device),
            ("pool.replicas", self.replicas, config.pool.replicas)) if have != want]
        wrong += [(what, f"at most {have}", want) for what, have, want in (
            ("ray.shards", self.shards, config.ray.shards),
            ("pool.workers", self.workers, config.pool.workers)) if want > have]
        if wrong:
            raise ValueError("this Ray pool cannot run the config: " + "; ".join(
                f"{what} is {want!r}, the pool's {have!r}" for what, have, want in wrong))

    def close(self) -> None:
        import ray

        for actors in self.actors:
            _stop_actors(ray, actors)
        self.actors = []

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def actor_names(owner: str, shard: int, workers: int) -> list[str]:
    """Names of a shard's worker actors (``ray.get_actor`` finds them; tests kill one)."""
    return [f"wb-{owner}-shard{shard}-worker{w}" for w in range(workers)]


def execute_ray(job: Job, pool: RayPool | None = None) -> RunReport:
    """Run ``job``'s pending episodes on worker and replica actors, shard by shard (on
    ``pool``'s warm actors when given, else on actors started for this run and stopped
    after it); returns what it measured: ``setup_s`` (placing the groups, starting the
    actors, warm-up), ``wall_s`` from the first episode handed out to the last result,
    and the episodes (per-process CPU and memory stay on the nodes)."""
    config = job.config
    ray = ensure_ray(config.ray.address)
    if pool is not None:
        pool.check(config, job.parts)
    sink = job.sink(f"{job.parts.policy_name} on {config.suite} (ray)")
    start = time.perf_counter()
    pending = {s.episode_id for s in sink.pending(job.plan)}
    options, videos = job.episode_options(), job.videos()
    estimates = expected_steps(job, None)
    token = uuid.uuid4().hex[:8]
    shards = [_Shard(k, deque(longest_first(
        [s for s in shard_episodes(job.plan, config.ray.shards, k) if s.episode_id in pending],
        estimates))) for k in range(config.ray.shards)]
    shards = [s for s in shards if s.queue]
    searches: list[SearchResult] = []
    if config.search.enabled:
        if pool is not None:
            raise ValueError("search.enabled picks each shard's workers and replicas; a warm "
                             "Ray pool has fixed ones (run without the pool, or without the "
                             "search)")
        # each shard's search and then its actors share the same CPUs
        config = config.replace(ray=replace(config.ray, cpus_per_shard=_search_cpus(
            ray, config, len(shards))))
        searches = search_shards(ray, job, config, shards)
    elif pool is None:
        _check_fits(ray, config, job.parts.device, len(shards))
    chosen = {s.shard: s.best for s in searches}
    failures: list[str] = []
    in_flight: dict[Any, tuple[_Shard, int, EpisodeSpec]] = {}
    try:
        for shard in shards:
            _start_shard(ray, job, config.replace(pool=chosen.get(shard.index, config.pool)),
                         shard, token, failures, sink, pool)

        def dispatch() -> None:
            for shard in shards:
                while shard.idle and shard.queue:
                    spec = shard.queue.popleft()
                    worker = shard.idle.pop(0)
                    if not sink.claim(spec, f"ray-shard-{shard.index}/worker-{worker}"):
                        shard.idle.insert(0, worker)
                        continue
                    ref = shard.workers[worker].run.remote(
                        spec, replace(options, video=spec.episode_id in videos))
                    in_flight[ref] = (shard, worker, spec)

        setup_s = time.perf_counter() - start
        start = time.perf_counter()  # the clock of the episodes, as the pool's
        dispatch()
        while in_flight:
            done, _ = ray.wait(list(in_flight), num_returns=1)
            shard, worker, spec = in_flight.pop(done[0])
            where = f"ray-shard-{shard.index}/worker-{worker}"
            try:
                sink.finish(spec, ray.get(done[0]), where)
                shard.idle.append(worker)
            except ray.exceptions.RayActorError as exc:
                message = (f"ray worker actor {worker} of shard {shard.index} died during the "
                           f"episode ({type(exc).__name__}); not retried")
                failures.append(message)
                sink.fail(spec, message, where)
                if not shard.idle and not any(s is shard for s, _, _ in in_flight.values()):
                    _hand_over(sink, shard, shards, in_flight, failures)
            except Exception as exc:  # the call itself failed: its episode only
                sink.fail(spec, f"ray worker call failed: {type(exc).__name__}: "
                                f"{str(exc)[:500]}", where)
                shard.idle.append(worker)
            dispatch()
        sizes = [ray.get(r.take_batch_sizes.remote()) for s in shards for r in s.replicas
                 if _alive(ray, r)]
    finally:
        sink.close()
        if pool is None:
            for shard in shards:
                if shard.actors is not None:
                    _stop_actors(ray, shard.actors)
    report = RunReport("ray", config.pool, list(sink.rows), time.perf_counter() - start,
                       math.nan, 0, setup_s=setup_s, failures=failures,
                       complete=all(not s.queue for s in shards))
    report.replica_stats = [_Sizes(s) for s in sizes]
    report.searches = searches
    return report


def search_shards(ray: Any, job: Job, config: EvalConfig, shards: Sequence[_Shard]
                  ) -> list[SearchResult]:
    """Each shard's concurrency search, all shards at once, each in its own group of
    ``ray.cpus_per_shard`` CPUs (and the shard's GPU); refused before any claim when
    the groups do not fit."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    parts, cpus = job.parts, config.ray.cpus_per_shard
    gpus = 1.0 if parts.device.startswith("cuda") else 0.0
    _refuse_unless_fits(ray, {"CPU": cpus * len(shards), "GPU": gpus * len(shards)},
                        f"{len(shards)} shard searches", f"ray.cpus_per_shard {cpus:g}")
    groups, actors = [], []
    try:
        for shard in shards:
            group = placement_group([{"CPU": cpus, **({"GPU": gpus} if gpus else {})}])
            groups.append(group)
            ray.get(group.ready(), timeout=config.ray.start_timeout_s)
            actors.append(ray.remote(SearchActor).options(
                num_cpus=cpus, num_gpus=gpus, max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group, placement_group_bundle_index=0)).remote(
                        parts, _sys_path()))
        try:
            return ray.get([actor.search.remote(list(shard.queue), config,
                                                max(1, math.floor(cpus)), shard.index)
                            for actor, shard in zip(actors, shards)])
        except ray.exceptions.RayTaskError as exc:  # the search's pool could not load the
            if isinstance(exc.cause, PolicyLoadFailed):  # policy: its error, without Ray's
                raise PolicyLoadFailed(str(exc.cause)) from None  # trace of the actor
            raise
    finally:
        for actor in actors:
            ray.kill(actor)
        for group in groups:
            remove_placement_group(group)


@dataclass
class _Sizes:
    """Batch sizes one replica actor served (what ``RunReport.batch_sizes`` counts)."""

    sizes: list[int]


def _start_shard(ray: Any, job: Job, config: EvalConfig, shard: _Shard, token: str,
                 failures: list[str], sink: Any, pool: RayPool | None) -> None:
    """Place the shard's group and start its actors (``config``'s pool section: the
    run's, or what the shard's search chose; or the warm pool's live ones) and warm
    them up; on failure its episodes are recorded as infrastructure errors, unless the
    policy did not load (:class:`PolicyLoadFailed`, raised: the run stops unclaimed)."""
    try:
        if pool is None:
            shard.actors = _place(ray, config, job.parts, shard.index, f"{job.run_id}-{token}")
            used = list(range(config.pool.workers))
        else:
            shard.actors = pool.actors[shard.index]
            used = [w for w in range(config.pool.workers)
                    if _alive(ray, shard.actors.workers[w])]
            if not used or not all(_alive(ray, r) for r in shard.actors.replicas):
                raise RuntimeError("an actor of the pool's shard has died")
        if config.warm_up:
            ray.get([shard.workers[w].warm_up.remote(list(shard.queue)) for w in used])
        shard.idle = used
    except PolicyLoadFailed:  # the policy's, not the shard's: the run stops, nothing claimed
        raise
    except Exception as exc:
        _fail_rest(sink, shard, f"its actors did not start: {type(exc).__name__}: "
                                f"{str(exc)[:300]}", failures)


def _place(ray: Any, config: EvalConfig, parts: Any, index: int, name: str) -> _Actors:
    """Place shard ``index``'s group and start its actors; they are ready on return."""
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    workers, replicas = config.pool.workers, config.pool.replicas
    cpus, gpus = _requests(config, parts.device)
    bundles = [{"CPU": cpus}] * workers + [{"CPU": cpus, **({"GPU": gpus} if gpus else {})}
                                           ] * replicas
    actors = _Actors(index, placement_group(bundles, strategy="PACK"))
    try:
        ray.get(actors.group.ready(), timeout=config.ray.start_timeout_s)
        strategy = lambda i: PlacementGroupSchedulingStrategy(  # noqa: E731
            placement_group=actors.group, placement_group_bundle_index=i)
        device = "cuda:0" if parts.device.startswith("cuda") else parts.device
        replica_cls = ray.remote(ReplicaActor)
        actors.replicas = [replica_cls.options(
            num_cpus=cpus, num_gpus=gpus, max_restarts=0, scheduling_strategy=strategy(
                workers + r)).remote(parts.policy_factory, LoadContext(
                    parts.protocol.name, device, index * replicas + r),
                    _sys_path(), config.pool.batch, config.pool.max_wait_ms)
            for r in range(replicas)]
        worker_cls = ray.remote(WorkerActor)
        actors.names = actor_names(name, index, workers)
        actors.workers = [worker_cls.options(
            name=actors.names[w], num_cpus=cpus, max_restarts=0, max_task_retries=0,
            scheduling_strategy=strategy(w)).remote(
                parts.adapter_factory, parts.capabilities, actors.replicas[w % replicas],
                _sys_path())
            for w in range(workers)]
        ray.get([a.ready.remote() for a in actors.replicas + actors.workers],
                timeout=config.ray.start_timeout_s)
        failed = [f for f in ray.get([r.load_failed.remote() for r in actors.replicas]) if f]
        if failed:
            raise PolicyLoadFailed.of(parts.policy_name, failed[0])
    except Exception:
        _stop_actors(ray, actors)
        raise
    return actors


def _search_cpus(ray: Any, config: EvalConfig, shards: int) -> float:
    """CPUs of one shard when a search sizes it: ``ray.cpus_per_shard``, else the
    cluster's CPUs over the shards."""
    return config.ray.cpus_per_shard or ray.cluster_resources().get("CPU", 1.0) / max(shards, 1)


def _requests(config: EvalConfig, device: str) -> tuple[float, float]:
    """(CPUs per actor, GPUs per replica actor) of one shard."""
    workers, replicas = config.pool.workers, config.pool.replicas
    cpus = (config.ray.cpus_per_shard or workers) / (workers + replicas)
    gpus = config.ray.gpus_per_replica
    if gpus is None:
        gpus = 1.0 / replicas if device.startswith("cuda") else 0.0
    return cpus, gpus


def _check_fits(ray: Any, config: EvalConfig, device: str, shards: int) -> None:
    """Refuse, before any episode is claimed, shards whose groups the cluster cannot hold
    all at once (they would wait for each other until the start timeout)."""
    cpus, gpus = _requests(config, device)
    actors = config.pool.workers + config.pool.replicas
    _refuse_unless_fits(
        ray, {"CPU": shards * actors * cpus, "GPU": shards * config.pool.replicas * gpus},
        f"{shards} shards", f"pool.workers {config.pool.workers}, pool.replicas "
        f"{config.pool.replicas}, ray.cpus_per_shard {config.ray.cpus_per_shard}, "
        f"ray.gpus_per_replica {config.ray.gpus_per_replica}")


def _refuse_unless_fits(ray: Any, needs: dict[str, float], what: str, settings: str) -> None:
    """Raise, naming ``what`` and the ``settings`` behind it, when the cluster lacks any
    of ``needs`` (resource name: amount wanted at once)."""
    have = ray.cluster_resources()
    for name, need in needs.items():
        if need > have.get(name, 0.0) + 1e-9:
            raise ValueError(
                f"ray: {what} need {need:g} {name}s at once ({settings}); the cluster has "
                f"{have.get(name, 0.0):g}. Lower ray.shards or the per-shard requests, or "
                "add nodes.")


def _hand_over(sink: Any, shard: _Shard, shards: Sequence[_Shard], in_flight: dict,
               failures: list[str]) -> None:
    """``shard`` has no live worker left: its queued episodes go, round robin, to the
    shards that still have a worker idle or busy; with none, they fail as
    infrastructure errors."""
    alive = [s for s in shards if s is not shard
             and (s.idle or any(t is s for t, _, _ in in_flight.values()))]
    if not alive:
        _fail_rest(sink, shard, "no live worker actor left in its shard", failures)
        return
    moved = len(shard.queue)
    for k, spec in enumerate(list(shard.queue)):
        alive[k % len(alive)].queue.append(spec)
    shard.queue.clear()
    if moved:
        failures.append(f"ray shard {shard.index}: no live worker actor left; its {moved} "
                        f"episodes not yet started moved to shard(s) "
                        f"{[s.index for s in alive]}")


def _fail_rest(sink: Any, shard: _Shard, why: str, failures: list[str]) -> None:
    message = f"ray shard {shard.index}: {why}"
    failures.append(message)
    while shard.queue:
        spec = shard.queue.popleft()
        if sink.claim(spec, f"ray-shard-{shard.index}"):
            sink.fail(spec, f"{message}; not run", f"ray-shard-{shard.index}")


def _stop_actors(ray: Any, actors: _Actors) -> None:
    from ray.util.placement_group import remove_placement_group

    try:  # the policy's own release first: its processes, files and GPU memory
        ray.get([r.release.remote() for r in actors.replicas], timeout=10)
    except Exception:
        pass
    for actor in actors.workers + actors.replicas:
        try:
            ray.kill(actor)
        except Exception:
            pass
    if actors.group is not None:
        try:
            remove_placement_group(actors.group)
        except Exception:
            pass


def _alive(ray: Any, actor: Any) -> bool:
    try:
        ray.get(actor.ready.remote(), timeout=10)
        return True
    except Exception:
        return False


def _sys_path() -> tuple[str, ...]:
    import sys

    return tuple(sys.path)


def ensure_ray(address: str | None) -> Any:
    """The ``ray`` module, connected: to the running instance if this process has one,
    else to ``address`` (None: a new local instance, even where ``ray start`` left a
    cluster on this machine that a bare ``ray.init()`` would join)."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False)
    return ray


def wait_for_cluster(cpus: int, timeout_s: float = 60.0) -> None:
    """Block until the Ray cluster offers ``cpus`` CPUs (nodes joining), or raise."""
    import ray

    deadline = time.monotonic() + timeout_s
    while ray.cluster_resources().get("CPU", 0) < cpus:
        if time.monotonic() > deadline:
            raise TimeoutError(f"Ray cluster has {ray.cluster_resources().get('CPU', 0)} CPUs; "
                               f"waited {timeout_s:.0f} s for {cpus}")
        time.sleep(1.0)
