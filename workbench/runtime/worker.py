"""A simulator worker process: owns its environments and renderers for its whole life.

It runs the episodes the pool sends it with :func:`~workbench.runtime.episode.run_episode`
(the same code the sequential evaluator runs), talking to its policy replica through
:class:`RemotePolicy`. With chunk-boundary observation it renders cameras only at the
steps where the policy reads them.
"""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import Any, Callable

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter
from workbench.policies.base import Capabilities, EpisodeContext, Observation
from workbench.records.media import episode_filename
from workbench.runtime.episode import (InfrastructureError, run_episode, save_episode_media,
                                       warm_up)
from workbench.runtime.replica import pin_threads
from workbench.runtime.transport import ObservationSlot


class RemotePolicyError(RuntimeError):
    """The policy raised inside its replica; the message holds the replica's traceback."""


class RemotePolicy:
    """Stands in for a Policy inside a worker; forwards calls to a replica over a pipe."""

    def __init__(self, capabilities: Capabilities, slot: ObservationSlot) -> None:
        self.capabilities = capabilities
        self.slot = slot
        self.conn: Connection | None = None
        self.replica_id = -1
        self.name = "remote"

    def bind(self, replica_id: int, conn: Connection) -> None:
        self.replica_id, self.conn = replica_id, conn

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
            self.conn.send((kind, payload))
            status, value = self.conn.recv()
        except (EOFError, OSError) as exc:
            raise InfrastructureError(
                f"policy replica {self.replica_id} died ({type(exc).__name__})") from None
        if status == "error":
            raise RemotePolicyError(f"in replica {self.replica_id}:\n{value}")
        return value


def worker_main(worker_id: int, adapter_factory: Callable[[], BenchmarkAdapter],
                capabilities: Capabilities, slot_bytes: int, control: Connection,
                replica_conns: dict[int, Connection], threads: int) -> None:
    """Entry point of a worker process; runs until told to stop or the control pipe closes."""
    pin_threads(threads)
    slot = ObservationSlot.create(slot_bytes)
    adapter = adapter_factory()
    proxy = RemotePolicy(capabilities, slot)
    control.send(("ready", slot.name))
    try:
        _loop(worker_id, adapter, proxy, control, replica_conns)
    finally:
        adapter.close()
        slot.close()


def _loop(worker_id: int, adapter: BenchmarkAdapter, proxy: RemotePolicy, control: Connection,
          replica_conns: dict[int, Connection]) -> None:
    options: dict[str, Any] = {}
    while True:
        try:
            kind, payload = control.recv()
        except (EOFError, OSError):
            return
        if kind == "stop":
            return
        if kind == "configure":
            proxy.bind(payload["replica"], replica_conns[payload["replica"]])
            options = payload  # no reply: the pipe keeps it ordered before the next run
        elif kind == "run":
            control.send(("result", _run_one(adapter, proxy, payload, options)))
        elif kind == "warmup":
            control.send(("warm", warm_up(adapter, payload, proxy.capabilities.features)))


def _run_one(adapter: BenchmarkAdapter, proxy: RemotePolicy, job: dict,
             options: dict) -> dict:
    spec, video = job["spec"], job["video"]
    start = time.perf_counter()
    result, trace = run_episode(adapter, proxy, spec,
                                observe_every_step=options.get("observe_every_step", False),
                                video=video)
    clip, rollout = save_episode_media(trace, episode_filename(spec.episode_id, job["run_id"]),
                                       options.get("out_dir"), video)
    return {"episode_id": spec.episode_id, "result": result, "video_path": clip,
            "rollout_path": rollout, "observed_steps": len(trace.observed_steps),
            "wall_s": time.perf_counter() - start}
