"""A simulator worker process: owns its environments and renderers for its whole life.

It runs the episodes the pool sends it with
:func:`~workbench.runtime.episode.run_recorded_episode` (the same step loop the
sequential backend runs), talking to its policy replica through :class:`ReplicaProxy`.
With chunk-boundary observation it renders cameras only at the steps where the policy
reads them.

A worker of several environments (``pool.envs_per_worker`` > 1) keeps a :class:`Lane`
per environment: a thread of its own (its adapter, renderer and shared-memory slot are
only ever used from it) running the same step loop, one episode at a time. The lanes'
policy calls wait for each other (:class:`LaneCalls`): once every lane with an episode
open has a call waiting, they go to the replica as one message, served as one batch.
A worker's process then does all its lanes' simulation while its replica serves one
full batch, with one pipe round trip per batch instead of one per episode step.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import Any, Callable, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter
from workbench.contracts.capabilities import Capabilities, EpisodeContext, Observation
from workbench.contracts.registry import adopt_sys_path
from workbench.contracts.rendering import use_headless_rendering
from workbench.contracts.results import (EpisodeResult, ErrorKind, InfrastructureError,
                                         PolicyTimeout, describe_exception)
from workbench.errors import WorkbenchError
from workbench.runtime.episode import run_recorded_episode, warm_up
from workbench.runtime.replica import name_process, pin_threads
from workbench.runtime.transport import ObservationSlot


class ReplicaError(WorkbenchError, RuntimeError):
    """The policy raised inside its replica; the message holds the replica's traceback."""


class ReplicaProxy:
    """Stands in for a Policy inside a worker; forwards calls to a replica over a pipe.

    Every call carries a number the replica's reply echoes, and waits at most
    ``timeout_s`` (the run's ``policy_call_timeout_s``): a call past it is the policy's
    failure (:class:`~workbench.contracts.results.PolicyTimeout`), its late reply is
    read and dropped, and while it is still owed every later call fails at once."""

    def __init__(self, capabilities: Capabilities, slot: ObservationSlot) -> None:
        self.capabilities = capabilities
        self.slot = slot
        self.conn: Connection | None = None
        self.replica_id = -1
        self.name = "remote"
        self.timeout_s: float | None = None
        self._calls = 0
        self._owed: dict[int, float] = {}  # calls that timed out: their number, when sent

    def bind(self, replica_id: int, conn: Connection) -> None:
        self.replica_id, self.conn, self._owed = replica_id, conn, {}

    def many(self, calls: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """Several calls (``(kind, payload)``: reset, act with a slot header, end) as one
        message; the replica's reply to each, to unpack with :func:`unpack_reply`."""
        return self._call("many", calls)

    def reset(self, context: EpisodeContext) -> None:
        self._call("reset", context)

    def act(self, observation: Observation) -> np.ndarray:
        return self._call("act", self.slot.write(observation))

    def end_episode(self, episode_id: str) -> None:
        self._call("end", episode_id)

    def _call(self, kind: str, payload: Any) -> Any:
        if self.conn is None:
            raise InfrastructureError("no policy replica attached to this worker")
        try:
            self._drain()
            if self._owed:
                since = time.monotonic() - min(self._owed.values())
                raise PolicyTimeout(f"the policy has not answered a call for {since:.0f} s "
                                    f"(replica {self.replica_id})")
            self._calls += 1
            number, sent = self._calls, time.monotonic()
            self.conn.send((kind, payload, number))
            while True:
                left = None if self.timeout_s is None else \
                    self.timeout_s - (time.monotonic() - sent)
                if left is not None and not self.conn.poll(max(left, 0.0)):
                    self._owed[number] = sent
                    raise PolicyTimeout(f"the policy's {kind} did not return within "
                                        f"{self.timeout_s:g} s (policy_call_timeout_s)")
                status, value, answered = self.conn.recv()
                if answered == number:
                    break
                self._owed.pop(answered, None)  # a late reply to a call that timed out
        except (EOFError, OSError) as exc:
            raise InfrastructureError(
                f"policy replica {self.replica_id} died ({type(exc).__name__})") from None
        return unpack_reply(status, value, f"replica {self.replica_id}")

    def _drain(self) -> None:
        """Read late replies already waiting, settling what they answer."""
        while self._owed and self.conn is not None and self.conn.poll(0):
            self._owed.pop(self.conn.recv()[2], None)


def unpack_reply(status: str, value: Any, where: str) -> Any:
    """A replica's reply: its value, or the error it reports raised as the policy's
    (``ReplicaError``, with the replica's traceback) or the infrastructure's."""
    if status == "error":
        raise ReplicaError(f"in {where}:\n{value}")
    if status == "infrastructure":
        raise InfrastructureError(f"in {where}: {value}")
    return value


def worker_main(worker_id: int, adapter_factory: Callable[[], BenchmarkAdapter],
                capabilities: Capabilities, slot_bytes: int, sys_path: Sequence[str],
                control: Connection, replica_conns: dict[int, Connection], threads: int) -> None:
    """Entry point of a worker process; runs until told to stop or the control pipe closes."""
    name_process(f"wb-worker-{worker_id}")
    pin_threads(threads)
    use_headless_rendering()
    adopt_sys_path(sys_path)
    slot = ObservationSlot.create(slot_bytes)
    adapter = adapter_factory()
    proxy = ReplicaProxy(capabilities, slot)
    lanes = Lanes(adapter_factory, proxy, slot_bytes, control)
    control.send(("ready", slot.name))
    try:
        _loop(adapter, proxy, control, replica_conns, lanes)
    finally:
        lanes.close()
        adapter.close()
        slot.close()


def _loop(adapter: BenchmarkAdapter, proxy: ReplicaProxy, control: Connection,
          replica_conns: dict[int, Connection], lanes: "Lanes") -> None:
    warmed: set[str] = set()  # tasks whose environments this worker has built
    while True:
        try:
            kind, payload = control.recv()
        except (EOFError, OSError):
            return
        if kind == "stop":
            return
        if kind == "configure":  # no reply: the pipe keeps it ordered before the next run
            replica, envs = payload
            lanes.configure(envs, lambda r=replica: proxy.bind(r, replica_conns[r]))
        elif kind == "attach":  # a replica started after this worker: its end of the pipe
            replica, conn = payload
            replica_conns[replica] = conn
        elif kind == "run" and lanes.count > 1:
            lanes.run(*payload)
        elif kind == "run":
            spec, options = payload
            proxy.timeout_s = options.call_timeout_s
            result = run_recorded_episode(adapter, proxy, spec, options)
            control.send(("result", (spec.episode_id, result)))
        elif kind == "warmup" and lanes.count > 1:
            control.send(("warm", *lanes.warm_up(payload, proxy.capabilities.features)))
        elif kind == "warmup":  # only tasks not built yet: a warm environment stays warm
            todo = [spec for spec in payload if spec.task not in warmed]
            seconds = warm_up(adapter, todo, proxy.capabilities.features)
            warmed.update(spec.task for spec in todo)
            control.send(("warm", seconds, sorted({spec.task for spec in todo})))


class LaneCalls:
    """The policy calls of a worker's lanes: a lane's act waits until every lane with an
    episode open has one waiting, then all go to the replica as one message (sent by the
    lane whose call or episode's end completed the set). A failure of the message (the
    replica died, the policy timed out) is every waiting lane's.

    A reset or an episode's end goes at once, alone (no message is in flight while the
    lock is held): the other lanes' acts wait for the lane's first act of its next
    episode instead of going without it, so every batch holds an act of every open lane.
    (Sent with the acts, each cost its lane a round without an act: two per episode.)"""

    def __init__(self, proxy: ReplicaProxy) -> None:
        self.proxy = proxy
        self.cond = threading.Condition()
        self.open = 0  # lanes with an episode open
        self.waiting: dict[int, tuple[str, Any]] = {}
        self.replies: dict[int, Any] = {}

    def call(self, lane: int, kind: str, payload: Any) -> Any:
        with self.cond:
            if kind != "act":
                reply = self.send([(kind, payload)])[0]
            else:
                self.waiting[lane] = (kind, payload)
                self.send_if_all_wait()
                while lane not in self.replies:
                    self.cond.wait()
                reply = self.replies.pop(lane)
        if isinstance(reply, BaseException):  # each lane its own copy: they raise in parallel
            try:
                copy = type(reply)(*reply.args)
            except Exception:
                copy = InfrastructureError(f"replica {self.proxy.replica_id}: {reply!r}")
            raise copy
        return unpack_reply(*reply, f"replica {self.proxy.replica_id}")

    def send_if_all_wait(self) -> None:
        """Send the waiting calls if every open lane has one (the caller holds the lock)."""
        if not self.waiting or len(self.waiting) < self.open:
            return
        lanes, calls = list(self.waiting), list(self.waiting.values())
        self.waiting = {}
        # every other lane waits for this reply: sending under the lock costs nothing
        self.replies.update(zip(lanes, self.send(calls)))
        self.cond.notify_all()

    def send(self, calls: list[tuple[str, Any]]) -> list[Any]:
        """The replica's reply to each of ``calls`` sent as one message, or the message's
        failure as each one's (the caller holds the lock)."""
        try:
            return self.proxy.many(calls)
        except Exception as exc:
            return [exc] * len(calls)


class LaneProxy:
    """What one lane's step loop sees as its policy: its calls through :class:`LaneCalls`,
    its observations through its own shared-memory slot."""

    def __init__(self, lane: int, calls: LaneCalls, slot: ObservationSlot) -> None:
        self.lane, self.calls, self.slot = lane, calls, slot
        self.capabilities = calls.proxy.capabilities

    def reset(self, context: EpisodeContext) -> None:
        self.calls.call(self.lane, "reset", context)

    def act(self, observation: Observation) -> np.ndarray:
        return self.calls.call(self.lane, "act", self.slot.write(observation))

    def end_episode(self, episode_id: str) -> None:
        self.calls.call(self.lane, "end", episode_id)


class Lane:
    """One environment of a worker and the thread that uses it."""

    def __init__(self, index: int, adapter: BenchmarkAdapter, proxy: LaneProxy) -> None:
        self.index, self.adapter, self.proxy = index, adapter, proxy
        self.jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.warmed: set[str] = set()
        self.thread = threading.Thread(target=self._serve, name=f"lane-{index}", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while (job := self.jobs.get()) is not None:
            job()

    def close(self, deadline: float) -> None:
        """End the thread (by ``deadline``, ``time.monotonic``) and release its
        environment; a thread still held by its episode is left to the process's exit."""
        self.thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if not self.thread.is_alive():
            self.adapter.close()
            self.proxy.slot.close()


class Lanes:
    """A worker's lanes (none while it steps one environment on its main thread).

    ``run`` starts an episode on an idle lane, or queues it when every lane is busy (the
    pool keeps one more episode than lanes on a worker, so a lane that finishes starts its
    next at once, still counted as open, and batches stay full); each lane sends its
    results on the control pipe. A new replica binding waits until no lane has an episode
    open, and episodes sent or queued meanwhile wait for it, as a one-environment worker
    reads its next message only after its episode: an episode never moves to another
    replica half-way (that replica never saw its reset)."""

    def __init__(self, adapter_factory: Callable[[], BenchmarkAdapter], proxy: ReplicaProxy,
                 slot_bytes: int, control: Connection) -> None:
        self.adapter_factory, self.slot_bytes, self.control = adapter_factory, slot_bytes, control
        self.calls = LaneCalls(proxy)
        self.lanes: list[Lane] = []
        self.idle: list[Lane] = []
        self.count = 1
        self.send_lock = threading.Lock()
        self.rebind: Callable[[], None] | None = None
        self.queued: deque[tuple[Any, Any]] = deque()  # episodes no lane has started

    def configure(self, envs: int, bind: Callable[[], None]) -> None:
        self.count = envs
        while envs > 1 and len(self.lanes) < envs:
            lane = len(self.lanes)
            slot = ObservationSlot.create(self.slot_bytes)
            self.lanes.append(Lane(lane, self.adapter_factory(),
                                   LaneProxy(lane, self.calls, slot)))
            self.idle.append(self.lanes[-1])
        with self.calls.cond:
            if self.calls.open:
                self.rebind = bind
                return
        bind()

    def run(self, spec: Any, options: Any) -> None:
        with self.calls.cond:
            self.queued.append((spec, options))
            free = [lane for lane in self.idle if lane.index < self.count]
            if self.rebind is not None or not free:
                return
            lane = free[-1]
            self.idle.remove(lane)
            self.calls.open += 1
            spec, options = self.queued.popleft()
        lane.jobs.put(lambda: self._episodes(lane, spec, options))

    def _episodes(self, lane: Lane, spec: Any, options: Any) -> None:
        """Run episodes on ``lane``, the next queued one after each, until none is left."""
        while True:
            self.calls.proxy.timeout_s = options.call_timeout_s
            try:
                result = run_recorded_episode(lane.adapter, lane.proxy, spec, options)
            except BaseException as exc:  # the step loop never raises for its faults
                result = EpisodeResult.failed(
                    ErrorKind.INFRASTRUCTURE, f"worker lane {lane.index}: "
                    f"{describe_exception(exc)}")
            done = spec.episode_id
            with self.calls.cond:
                going_on = bool(self.queued) and self.rebind is None \
                    and lane.index < self.count
                if going_on:
                    spec, options = self.queued.popleft()
                else:
                    self.idle.append(lane)
                    self.calls.open -= 1
                    self.calls.send_if_all_wait()
            with self.send_lock:
                self.control.send(("result", (done, result)))
            if not going_on:
                return self._rebind_if_due()

    def _rebind_if_due(self) -> None:
        with self.calls.cond:
            if self.rebind is None or self.calls.open:
                return
            rebind, self.rebind = self.rebind, None
            queued, self.queued = self.queued, deque()
        rebind()
        for spec, options in queued:
            self.run(spec, options)

    def warm_up(self, plan: Sequence[Any], features: Sequence[str]) -> tuple[float, list[str]]:
        """Each lane builds, on its own thread, the environments of ``plan``'s tasks that
        it has not built; the seconds this took and the tasks built now. A lane's failure
        is raised here, as a one-environment worker's would be."""
        lanes = self.lanes[:self.count]
        done: queue.Queue[list[str] | BaseException] = queue.Queue()

        def build(lane: Lane) -> None:
            todo = [spec for spec in plan if spec.task not in lane.warmed]
            try:
                warm_up(lane.adapter, todo, features)
                lane.warmed.update(spec.task for spec in todo)
                done.put([spec.task for spec in todo])
            except BaseException as exc:
                done.put(exc)

        start, built = time.perf_counter(), set()
        for lane in lanes:
            lane.jobs.put(lambda lane=lane: build(lane))
        for _ in lanes:
            tasks = done.get()
            if isinstance(tasks, BaseException):
                raise tasks
            built.update(tasks)
        return time.perf_counter() - start, sorted(built)

    def close(self, timeout_s: float = 5.0) -> None:
        for lane in self.lanes:
            lane.jobs.put(None)
        deadline = time.monotonic() + timeout_s
        for lane in self.lanes:
            lane.close(deadline)
