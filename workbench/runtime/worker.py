"""A simulator worker process: owns its environments and renderers for its whole life.

It runs the episodes the pool sends it with
:func:`~workbench.runtime.episode.run_recorded_episode` (the same step loop the
sequential backend runs), talking to its policy replica through :class:`ReplicaProxy`.
With chunk-boundary observation it renders cameras only at the steps where the policy
reads them.
"""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import Any, Callable, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter
from workbench.contracts.capabilities import Capabilities, EpisodeContext, Observation
from workbench.contracts.registry import adopt_sys_path
from workbench.contracts.rendering import use_headless_rendering
from workbench.contracts.results import InfrastructureError, PolicyTimeout
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
    control.send(("ready", slot.name))
    try:
        _loop(adapter, proxy, control, replica_conns)
    finally:
        adapter.close()
        slot.close()


def _loop(adapter: BenchmarkAdapter, proxy: ReplicaProxy, control: Connection,
          replica_conns: dict[int, Connection]) -> None:
    warmed: set[str] = set()  # tasks whose environments this worker has built
    while True:
        try:
            kind, payload = control.recv()
        except (EOFError, OSError):
            return
        if kind == "stop":
            return
        if kind == "configure":  # no reply: the pipe keeps it ordered before the next run
            proxy.bind(payload, replica_conns[payload])
        elif kind == "attach":  # a replica started after this worker: its end of the pipe
            replica, conn = payload
            replica_conns[replica] = conn
        elif kind == "run":
            spec, options = payload
            proxy.timeout_s = options.call_timeout_s
            result = run_recorded_episode(adapter, proxy, spec, options)
            control.send(("result", result))
        elif kind == "warmup":  # only tasks not built yet: a warm environment stays warm
            todo = [spec for spec in payload if spec.task not in warmed]
            seconds = warm_up(adapter, todo, proxy.capabilities.features)
            warmed.update(spec.task for spec in todo)
            control.send(("warm", seconds, sorted({spec.task for spec in todo})))
