"""Simulator workers and policy replicas as two pools, sized independently.

``EvalPool`` starts up to ``max_workers`` worker processes and ``max_replicas``
replica processes once (each keeps its simulator, renderer or model for its life),
connected by a pipe per (worker, replica) pair. :meth:`EvalPool.configure` chooses
how many of each take part and which replica serves which worker; :meth:`EvalPool.run`
hands out episodes one at a time to idle workers and records each result.

Failures: a worker that dies has its in-flight episode recorded as an infrastructure
error (never retried) and the run goes on with the others; a replica that dies fails
the episodes it was serving (infrastructure) and its workers move to a live replica.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Sequence

from workbench.benchmarks.base import BenchmarkAdapter
from workbench.plan import EpisodeSpec
from workbench.profiling.system import ResourceMonitor
from workbench.policies.base import Capabilities, LoadContext, Policy
from workbench.records.media import wants_video
from workbench.records.store import EpisodeResult, RecordStore
from workbench.runtime.replica import ReplicaStats, replica_main
from workbench.runtime.worker import worker_main


@dataclass(frozen=True)
class PoolConfig:
    """How many workers and replicas take part, and how replicas batch.

    observe_every_step: render every step (official-like) instead of only at
    chunk boundaries.
    """

    workers: int
    replicas: int = 1
    max_batch: int = 8
    max_wait_ms: float = 5.0
    observe_every_step: bool = False

    def __post_init__(self) -> None:
        if self.workers < 1 or self.replicas < 1:
            raise ValueError(f"workers and replicas must be >= 1, got {self.workers}, "
                             f"{self.replicas}")
        if self.max_batch < 1 or self.max_wait_ms < 0:
            raise ValueError("max_batch must be >= 1 and max_wait_ms >= 0")


@dataclass
class RunReport:
    """What one :meth:`EvalPool.run` measured. ``rows``: one dict per finished episode."""

    config: PoolConfig
    rows: list[dict[str, Any]]
    wall_s: float
    steps: int
    busy_cores: float
    peak_rss_bytes: int
    replica_stats: list[ReplicaStats] = field(default_factory=list)
    complete: bool = True
    failures: list[str] = field(default_factory=list)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def successes(self) -> int:
        return sum(bool(r["success"]) for r in self.rows)


@dataclass
class _Proc:
    process: Any
    control: Connection
    alive: bool = True
    info: Any = None


class EvalPool:
    """Worker and replica processes kept warm across runs (probes and evaluations)."""

    def __init__(self, adapter_factory: Callable[[], BenchmarkAdapter],
                 policy_factory: Callable[[], Policy], max_workers: int, max_replicas: int = 1,
                 device: str = "cpu", worker_threads: int = 1, replica_threads: int = 1,
                 out_dir: str | None = None, slot_bytes: int | None = None) -> None:
        probe = policy_factory()
        self.capabilities: Capabilities = probe.capabilities
        self.policy_name = probe.name
        self.out_dir = out_dir
        adapter = adapter_factory()
        self.protocol = adapter.protocol
        self.max_steps = adapter.max_steps
        image_size = getattr(adapter, "image_size", 224)
        adapter.close()
        cameras = sum(self.protocol.feature(f).dtype == "uint8" for f in self.capabilities.features)
        slot = slot_bytes or max(cameras, 1) * image_size * image_size * 3
        ctx = process_context()
        pipes = {(w, r): ctx.Pipe() for w in range(max_workers) for r in range(max_replicas)}
        self.replicas = [self._start(ctx, replica_main, r, policy_factory,
                                     LoadContext(self.protocol.name, _device(device, r), r),
                                     {w: pipes[w, r][1] for w in range(max_workers)},
                                     replica_threads) for r in range(max_replicas)]
        self.workers = [self._start(ctx, worker_main, w, adapter_factory, self.capabilities, slot,
                                    {r: pipes[w, r][0] for r in range(max_replicas)},
                                    worker_threads) for w in range(max_workers)]
        for a, b in pipes.values():  # the children hold them now; EOF must reach them
            a.close(), b.close()
        for proc in self.replicas + self.workers:
            try:
                proc.info = _expect(proc.control, ("loaded", "ready"), timeout=600)
            except RuntimeError as exc:
                self.close()
                raise RuntimeError(
                    f"{proc.process.name} failed to start ({exc}; exit code "
                    f"{proc.process.exitcode}). A script that starts a pool needs "
                    "`if __name__ == '__main__':`, and policies and adapters must be importable "
                    "by their module; the child's traceback is above.") from None
        self.replica_rss = [p.info[1] for p in self.replicas]
        self.replica_gpu_bytes = [p.info[3] for p in self.replicas]
        self.config: PoolConfig | None = None
        self.assignment: dict[int, int] = {}

    @staticmethod
    def _start(ctx: Any, target: Callable, index: int, *args: Any) -> _Proc:
        parent, child = ctx.Pipe()
        process = ctx.Process(target=target, args=(index, *args[:-2], child, *args[-2:]),
                              daemon=True, name=f"{target.__name__}-{index}")
        process.start()
        child.close()
        return _Proc(process, parent)

    # -- configuration ----------------------------------------------------------
    def live_workers(self) -> list[int]:
        return [i for i, p in enumerate(self.workers) if p.alive and p.process.is_alive()]

    def live_replicas(self) -> list[int]:
        return [i for i, p in enumerate(self.replicas) if p.alive and p.process.is_alive()]

    def configure(self, config: PoolConfig) -> None:
        """Use ``config.workers`` live workers and ``config.replicas`` live replicas."""
        workers, replicas = self.live_workers(), self.live_replicas()
        if config.workers > len(workers) or config.replicas > len(replicas):
            raise ValueError(f"pool has {len(workers)} live workers and {len(replicas)} live "
                             f"replicas; asked for {config.workers} and {config.replicas}")
        self.config = config
        self._assign(workers[:config.workers], replicas[:config.replicas])

    def _assign(self, workers: Sequence[int], replicas: Sequence[int]) -> None:
        cfg = self.config
        self.assignment = {w: replicas[i % len(replicas)] for i, w in enumerate(workers)}
        for r in self.live_replicas():
            mine = [w for w, rr in self.assignment.items() if rr == r]
            self.replicas[r].control.send(("configure", {
                "workers": mine, "max_batch": cfg.max_batch, "max_wait_ms": cfg.max_wait_ms}))
            _expect(self.replicas[r].control, ("configured",), timeout=120)
        for w, r in self.assignment.items():
            self.workers[w].control.send(("configure", {
                "replica": r, "observe_every_step": cfg.observe_every_step,
                "out_dir": self.out_dir}))

    def warm_up(self, plan: Sequence[EpisodeSpec]) -> float:
        """Have every live worker build the environments and renderers of ``plan``'s tasks."""
        start = time.perf_counter()
        for w in self.live_workers():
            self.workers[w].control.send(("warmup", list(plan)))
        for w in self.live_workers():
            _expect(self.workers[w].control, ("warm",), timeout=600)
        return time.perf_counter() - start

    # -- running ----------------------------------------------------------------
    def run(self, plan: Sequence[EpisodeSpec], store: RecordStore | None = None,
            run_id: str | None = None, video: str | int = "off",
            time_limit_s: float | None = None,
            on_result: Callable[[dict], None] | None = None) -> RunReport:
        """Run ``plan`` (episodes not yet claimed in ``store``, if one is given)."""
        if self.config is None:
            raise RuntimeError("EvalPool.run() before configure()")
        todo = sorted(plan)
        if store is not None:
            pending = set(store.pending(run_id))
            todo = [s for s in todo if s.episode_id in pending]
        state = _RunState(deque(todo), store, run_id, video, on_result)
        deadline = None if time_limit_s is None else time.perf_counter() + time_limit_s
        with ResourceMonitor(self.pids(), interval_s=0.5, children=False,
                             gpu_index=None) as monitor:
            while state.queue or state.in_flight:
                if deadline is not None and time.perf_counter() > deadline:
                    state.failures.append(f"episodes did not finish within {time_limit_s:.0f} s")
                    break
                if not self._dispatch(state):
                    break
                self._collect(state, timeout=0.25)
            if state.in_flight:  # only after a time limit: let the stragglers finish
                self._drain(state)
        usage = monitor.result
        return RunReport(self.config, state.rows, usage.wall_s,
                         sum(int(r["steps"]) for r in state.rows), usage.cores_busy,
                         usage.peak_rss_bytes, self.replica_stats(),
                         not state.queue and not state.in_flight, state.failures)

    def _dispatch(self, state: "_RunState") -> bool:
        for w in list(self.assignment):
            if w in state.in_flight or not state.queue:
                continue
            if not self.workers[w].process.is_alive():  # died while idle: nothing was lost
                self._worker_died(state, w)
                continue
            spec = state.queue.popleft()
            if state.store is not None and not state.store.claim(state.run_id, spec.episode_id,
                                                                 f"worker-{w}"):
                continue
            state.in_flight[w] = spec
            video = wants_video(state.video, state.dispatched)
            state.dispatched += 1
            try:
                self.workers[w].control.send(("run", {"spec": spec, "video": video,
                                                      "run_id": state.run_id}))
            except (BrokenPipeError, OSError):
                self._worker_died(state, w)
        if not state.in_flight and state.queue:
            for spec in state.queue:
                self._record(state, spec, EpisodeResult(
                    False, None, 0, 0.0, "infrastructure", "no live simulator worker left"))
            state.queue.clear()
            return False
        return True

    def _collect(self, state: "_RunState", timeout: float) -> None:
        controls = {self.workers[w].control: w for w in state.in_flight}
        sentinels = {self.workers[w].process.sentinel: ("worker", w) for w in state.in_flight}
        sentinels.update({self.replicas[r].process.sentinel: ("replica", r)
                          for r in set(self.assignment.values()) if self.replicas[r].alive})
        for ready in wait([*controls, *sentinels], timeout):
            if ready in controls:
                self._receive(state, controls[ready])
            elif sentinels[ready][0] == "worker":
                self._worker_died(state, sentinels[ready][1])
            else:
                self._replica_died(sentinels[ready][1])

    def _receive(self, state: "_RunState", w: int) -> None:
        try:
            kind, payload = self.workers[w].control.recv()
        except (EOFError, OSError):
            return self._worker_died(state, w)
        spec = state.in_flight.pop(w)
        result = replace(payload["result"], video_path=payload["video_path"],
                         rollout_path=payload["rollout_path"])
        self._record(state, spec, result, observed=payload["observed_steps"], worker=w)

    def _record(self, state: "_RunState", spec: EpisodeSpec, result: EpisodeResult,
                observed: int = 0, worker: int = -1) -> None:
        if state.store is not None:
            if result.error_kind == "infrastructure" and worker < 0:
                state.store.claim(state.run_id, spec.episode_id, "pool")
            state.store.finish(state.run_id, spec.episode_id, result)
        row = {**spec.to_dict(), **result.__dict__, "observed_steps": observed, "worker": worker}
        state.rows.append(row)
        if state.on_result is not None:
            state.on_result(row)

    def _worker_died(self, state: "_RunState", w: int) -> None:
        proc = self.workers[w]
        if not proc.alive:
            return
        proc.alive = False
        proc.process.join(timeout=5)
        code = proc.process.exitcode
        state.failures.append(f"simulator worker {w} died (exit code {code})")
        spec = state.in_flight.pop(w, None)
        self.assignment.pop(w, None)
        if spec is not None:
            self._record(state, spec, EpisodeResult(
                False, None, 0, 0.0, "infrastructure",
                f"simulator worker {w} died (exit code {code}) during the episode; not retried"),
                worker=w)

    def _replica_died(self, r: int) -> None:
        proc = self.replicas[r]
        if not proc.alive:
            return
        proc.alive = False
        live = [x for x in set(self.assignment.values()) if x != r and self.replicas[x].alive]
        live = live or [x for x in self.live_replicas() if x != r]
        if live:  # its workers report their failed episodes, then move to a live replica
            self._assign(list(self.assignment), live)

    def _drain(self, state: "_RunState") -> None:
        """Wait for the episodes in flight (they are bounded by the step limit), so no
        late result can be mistaken for a later run's."""
        while state.in_flight:
            self._collect(state, timeout=1.0)

    def replica_stats(self) -> list[ReplicaStats]:
        out = []
        for r in sorted(set(self.assignment.values())):
            if self.replicas[r].alive:
                self.replicas[r].control.send(("stats", None))
                out.append(_expect(self.replicas[r].control, ("stats",), timeout=60)[1])
        return out

    def pids(self) -> list[int]:
        return [p.process.pid for p in self.workers + self.replicas if p.alive]

    def close(self) -> None:
        for proc in self.workers + self.replicas:
            try:
                proc.control.send(("stop", None))
            except (BrokenPipeError, OSError):
                pass
        for proc in self.workers + self.replicas:
            proc.process.join(timeout=10)
            if proc.process.is_alive():
                proc.process.kill()
                proc.process.join(timeout=5)

    def __enter__(self) -> "EvalPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass
class _RunState:
    queue: deque
    store: RecordStore | None
    run_id: str | None
    video: str | int
    on_result: Callable[[dict], None] | None
    in_flight: dict[int, EpisodeSpec] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    dispatched: int = 0


# Imported once by the fork server, so each worker and replica starts without re-importing
# torch, MuJoCo and MetaWorld (seconds each on a small machine).
PRELOAD = ["workbench.runtime.worker", "workbench.runtime.replica", "workbench.policies.vision",
           "workbench.policies.scripted", "workbench.benchmarks.metaworld", "torch", "mujoco",
           "metaworld", "metaworld.policies"]


def process_context() -> Any:
    """The multiprocessing context for pool processes: a fork server with heavy modules
    preloaded (nothing with threads or GL contexts is started before the fork)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _expect(conn: Connection, kinds: tuple[str, ...], timeout: float) -> Any:
    if not conn.poll(timeout):
        raise RuntimeError(f"no {'/'.join(kinds)} message within {timeout:.0f} s")
    try:
        message = conn.recv()
    except (EOFError, OSError) as exc:
        raise RuntimeError(f"process exited before sending {'/'.join(kinds)}") from exc
    if message[0] not in kinds:
        raise RuntimeError(f"expected {'/'.join(kinds)}, got {message[0]!r}")
    return message


def _device(device: str, replica: int) -> str:
    if device == "cuda":
        import torch

        return f"cuda:{replica % max(torch.cuda.device_count(), 1)}"
    return device
