"""A policy replica process: loads one replica and serves batches to simulator workers.

Dynamic batching: the first ``act`` request opens a batch; it is served when it
holds ``max_batch`` requests, when no other attached worker may ask before
``max_wait_ms`` has passed, or when it has passed, whichever comes first. A worker may
ask if it has asked in the episode it has open (one resetting its environment or between
episodes sends nothing, so no batch waits for it) and is due by then: its last reply's
time plus its think time (how long it took to ask again after a reply, averaged), so a
batch does not wait out the deadline for a worker still simulating its chunk. A worker
whose think time is not known yet is waited for.

One episode's fault stays its own: an observation the replica cannot read fails only
its episode (an infrastructure error), and when a native batch raises, its
observations are served again one at a time, so only the episode whose observation
makes the policy raise gets the error (with the replica's traceback). A policy
without native batching is asked one observation at a time anyway. Whatever the
policy's code does is the policy's error, a ``MemoryError`` or CUDA out-of-memory, a
``sys.exit`` or an ``os._exit`` (refused while its code runs:
:mod:`workbench.runtime.guard`) among them. The replica keeps serving, and unloads the
policy when it is stopped.

A worker of several environments sends its lanes' acts as one message (``many``), served
as one batch (at most ``max_batch``) with one reply listing each call's, and a lane's
reset or end as a message of its own (a ``many`` message may hold any of the three:
resets and ends are made in order, then the acts); such a worker's requests never wait
for another worker's.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Sequence

from workbench.contracts.capabilities import LoadContext
from workbench.contracts.registry import adopt_sys_path
from workbench.contracts.results import bounded, blames_the_policy_load, describe_exception
from workbench.policies.base import Policy
from workbench.runtime.guard import guarded, release
from workbench.runtime.transport import SlotReader


@dataclass
class ReplicaStats:
    """Counters a replica reports: batches served, requests, busy seconds in act_batch
    (wall clock, ``busy_s``; this process's CPU, ``busy_cpu_s``)."""

    batches: int = 0
    requests: int = 0
    busy_s: float = 0.0
    busy_cpu_s: float = 0.0
    max_batch_seen: int = 0
    load_s: float = 0.0
    rss_bytes: int = 0
    sizes: list[int] = field(default_factory=list)
    peak_rss_bytes: int = 0
    gpu_peak_bytes: int = 0
    device: str = "cpu"

    def clear(self) -> None:
        """Zero the counters (after a report), keeping the load time."""
        self.batches, self.requests, self.busy_s, self.max_batch_seen = 0, 0, 0.0, 0
        self.busy_cpu_s = 0.0
        self.sizes = []


@dataclass
class _Batching:
    max_batch: int = 8
    max_wait_s: float = 0.005
    workers: dict[Connection, int] = field(default_factory=dict)


@dataclass
class _Arrivals:
    """When each worker is due to ask again: the time of its last reply (in the episode it
    has open) plus its think time, the running average of how long it took to ask again
    after a reply (replica clock, ``time.perf_counter``)."""

    replied: dict[int, float] = field(default_factory=dict)
    think: dict[int, float] = field(default_factory=dict)

    def asked(self, worker: int, now: float) -> None:
        if worker in self.replied:
            sample = now - self.replied.pop(worker)
            self.think[worker] = 0.5 * (self.think.get(worker, sample) + sample)

    def answered(self, worker: int, now: float) -> None:
        self.replied[worker] = now

    def forget(self, worker: int) -> None:
        """A reset or an end: its next request comes after a reset, not a think time."""
        self.replied.pop(worker, None)

    def due_by(self, worker: int, when: float) -> bool:
        """Whether ``worker`` may ask by ``when`` (yes while its think time is unknown)."""
        if worker not in self.replied or worker not in self.think:
            return True
        return self.replied[worker] + self.think[worker] <= when


def name_process(name: str) -> None:
    """Name this process ``name`` (at most 15 characters) where ``top``, ``ps -o comm`` and
    ``psutil.Process.name()`` show it (Linux; elsewhere nothing happens): a pool's workers
    are ``wb-worker-N``, its replicas ``wb-replica-N``."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # 15: PR_SET_NAME
    except (OSError, AttributeError):
        pass


def pin_threads(threads: int) -> None:
    """Limit math and software-rendering threads of this process (before they start).

    One thread means Mesa's llvmpipe rasterizes in the calling thread
    (``LP_NUM_THREADS=0``), the same pixels. ``LP_NUM_THREADS=1`` starts a rasterizer
    thread beside the caller: one process alone then spent a median 1.16x the CPU per
    MetaWorld step (0.99-1.38 over nine interleaved rounds, perf/render_threads.py), a
    hand-off that busy cores hide (cores + 1 processes at once: 1.02x the steps/s,
    0.79-1.26, no measurable change). So a bound measured in one process alone counts
    the work, not the hand-off."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ["LP_NUM_THREADS"] = "0" if threads == 1 else str(threads)


def replica_main(replica_id: int, factory: Callable[[], Policy], context: LoadContext,
                 sys_path: Sequence[str], control: Connection,
                 worker_conns: dict[int, Connection], threads: int) -> None:
    """Entry point of a replica process; runs until told to stop or the control pipe closes."""
    name_process(f"wb-replica-{replica_id}")
    pin_threads(threads)
    adopt_sys_path(sys_path)
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        pass
    stats = ReplicaStats(device=context.device)
    start = time.perf_counter()
    policy, failure = load_policy(factory, context)
    if policy is None:
        control.send(("load_failed", failure))  # the parent names it
        raise SystemExit(1)
    stats.load_s = time.perf_counter() - start
    control.send(("loaded", _rss(), stats.load_s, _gpu_bytes(context.device)))
    try:
        _serve(policy, control, worker_conns, stats)
    except Exception:  # the replica's own code failed, never the policy's (it is guarded)
        traceback.print_exc()
        raise SystemExit(HARNESS_EXIT_CODE) from None
    finally:
        release(policy)


def load_policy(factory: Callable[[], Policy], context: LoadContext
                ) -> tuple[Policy | None, str | None]:
    """``(policy, None)``: the policy built and loaded, guarded; or ``(None, error)`` when
    the policy's own code failed (what
    :class:`~workbench.contracts.results.PolicyLoadFailed` names). An error the
    workbench already names (the config's, a contract's, the harness's) is raised."""
    try:
        policy = factory()
        guarded(policy.load, context)
    except Exception as exc:
        if not blames_the_policy_load(exc):
            raise
        return None, describe_exception(exc)
    return policy, None


HARNESS_EXIT_CODE = 86
"""A replica's exit code when its own serving code failed: the harness's fault, unlike
any other exit, which only the policy's code can cause."""


def _serve(policy: Policy, control: Connection, worker_conns: dict[int, Connection],
           stats: ReplicaStats) -> None:
    cfg, reader, arrivals = _Batching(), SlotReader(), _Arrivals()
    open_episodes: dict[int, set[str]] = {}
    asked: set[int] = set()  # workers that have asked for an action in their open episode
    pending: list[tuple[Connection, dict, int]] = []
    deadline = 0.0
    while True:
        timeout = None if not pending else max(0.0, deadline - time.perf_counter())
        for conn in wait([control, *cfg.workers], timeout):
            if conn is control:
                if not _control(control, cfg, worker_conns, stats, policy):
                    reader.close()
                    return
                continue
            try:
                kind, payload, number = conn.recv()
            except (EOFError, OSError):  # the worker died: drop it and its episodes
                asked.discard(cfg.workers.get(conn, -1))
                _drop_worker(policy, cfg, conn, open_episodes)
                continue
            worker = cfg.workers[conn]
            if kind == "many":  # a worker's lanes: served at once, their acts one batch
                _serve_many(policy, reader, conn, payload, number, cfg.max_batch,
                            open_episodes.setdefault(worker, set()), stats)
            elif kind == "act":
                asked.add(worker)
                now = time.perf_counter()
                arrivals.asked(worker, now)
                if not pending:
                    deadline = now + cfg.max_wait_s
                pending.append((conn, payload, number))
            else:
                asked.discard(worker)  # a reset or an end: it asks again after its reset
                arrivals.forget(worker)
                _lifecycle(policy, conn, kind, payload, number,
                           open_episodes.setdefault(worker, set()))
        if not pending:
            continue
        waiting = {cfg.workers[conn] for conn, _, _ in pending if conn in cfg.workers}
        if (len(pending) >= _batch_target(cfg, asked, waiting, arrivals, deadline)
                or time.perf_counter() >= deadline):
            served, pending = pending[:cfg.max_batch], pending[cfg.max_batch:]
            _serve_batch(policy, reader, served, stats)
            now = time.perf_counter()
            for conn, _, _ in served:
                if conn in cfg.workers:
                    arrivals.answered(cfg.workers[conn], now)
            deadline = now + cfg.max_wait_s


def _batch_target(cfg: _Batching, asked: set[int], waiting: set[int], arrivals: _Arrivals,
                  deadline: float) -> int:
    """How many requests a batch waits for (never more than ``max_batch``, never fewer
    than one): those of the ``waiting`` workers, plus one from each other attached worker
    that has asked in the episode it has open (a worker resetting its environment, its
    policy reset first, between episodes, or without an episode left at the end of a plan
    sends nothing for a while) and is due to ask again by ``deadline``."""
    coming = sum(1 for w in cfg.workers.values()
                 if w in asked and w not in waiting and arrivals.due_by(w, deadline))
    return min(cfg.max_batch, max(1, len(waiting) + coming))


def _control(control: Connection, cfg: _Batching, worker_conns: dict[int, Connection],
             stats: ReplicaStats, policy: Policy) -> bool:
    try:
        kind, payload = control.recv()
    except (EOFError, OSError):
        return False
    if kind == "configure":
        cfg.max_batch = max(1, min(payload["max_batch"], policy.capabilities.max_batch))
        cfg.max_wait_s = payload["max_wait_ms"] / 1000.0
        cfg.workers = {worker_conns[w]: w for w in payload["workers"]}
        control.send(("configured", None))
    elif kind == "attach":  # a worker started after this replica: its end of the pipe
        worker, conn = payload
        worker_conns[worker] = conn
    elif kind == "stats":  # GPU peak since the last report; resident peak over the life
        stats.rss_bytes, stats.peak_rss_bytes = _rss(), _peak_rss()
        stats.gpu_peak_bytes = _gpu_peak_bytes(stats.device)
        control.send(("stats", stats))
        stats.clear()
    elif kind == "stop":
        return False
    return True


def _lifecycle(policy: Policy, conn: Connection, kind: str, payload: Any, number: int,
               episodes: set[str]) -> None:
    conn.send((*_lifecycle_reply(policy, kind, payload, episodes), number))


def _lifecycle_reply(policy: Policy, kind: str, payload: Any,
                     episodes: set[str]) -> tuple[str, Any]:
    if kind == "reset":
        reply = lifecycle_reply(policy.reset, payload)
        if reply[0] == "ok":
            episodes.add(payload.episode_id)
        return reply
    if kind == "end":
        episodes.discard(payload)
        return lifecycle_reply(policy.end_episode, payload)
    return "infrastructure", f"unknown call {kind!r}"


def _serve_many(policy: Policy, reader: SlotReader, conn: Connection, calls: Any,
                number: int, max_batch: int, episodes: set[str], stats: ReplicaStats) -> None:
    """A worker's lanes' calls, one per lane: resets and ends in order, then the acts in
    batches of at most ``max_batch``; one reply listing each call's."""
    replies: list[tuple[str, Any] | None] = [None] * len(calls)
    acts = []
    for k, (kind, payload) in enumerate(calls):
        if kind == "act":
            acts.append(k)
        else:
            replies[k] = _lifecycle_reply(policy, kind, payload, episodes)
    for first in range(0, len(acts), max_batch):
        part = acts[first:first + max_batch]
        for k, reply in zip(part, _answer_batch(policy, reader, [calls[k][1] for k in part],
                                                stats)):
            replies[k] = reply
    try:
        conn.send(("ok", replies, number))
    except (BrokenPipeError, OSError):
        pass  # that worker died; the pool records its episodes


def lifecycle_reply(call: Callable[[Any], Any], payload: Any) -> tuple[str, Any]:
    """``("ok", None)`` after ``call(payload)`` (a reset or an episode's end), or
    ``("error", traceback)`` when the policy raised."""
    try:
        guarded(call, payload)
        return "ok", None
    except Exception:
        return "error", bounded(traceback.format_exc())


def _serve_batch(policy: Policy, reader: SlotReader,
                 batch: list[tuple[Connection, dict, int]], stats: ReplicaStats) -> None:
    replies = _answer_batch(policy, reader, [header for _, header, _ in batch], stats)
    for (conn, _, number), reply in zip(batch, replies):
        try:
            conn.send((*reply, number))
        except (BrokenPipeError, OSError):
            pass  # that worker died; the pool records its episode


def _answer_batch(policy: Policy, reader: SlotReader, headers: list[dict],
                  stats: ReplicaStats) -> list[tuple[str, Any]]:
    """One batch's replies: ``("actions", chunk)``, ``("error", traceback)``, or
    ``("infrastructure", why)`` for an observation that could not be read."""
    start, cpu0 = time.perf_counter(), time.thread_time()
    replies: list[tuple[str, Any] | None] = [None] * len(headers)
    readable: list[tuple[int, Any]] = []
    for k, header in enumerate(headers):
        try:
            readable.append((k, reader.read(header)))
        except Exception as exc:  # the transport failed: this episode only
            replies[k] = ("infrastructure", f"reading the observation: {exc!r}")
    for (k, _), reply in zip(readable, act_isolated(policy, [obs for _, obs in readable])):
        replies[k] = reply
    readable.clear()
    stats.busy_s += time.perf_counter() - start
    stats.busy_cpu_s += time.thread_time() - cpu0
    stats.batches += 1
    stats.requests += len(headers)
    stats.max_batch_seen = max(stats.max_batch_seen, len(headers))
    stats.sizes.append(len(headers))
    return replies


def act_isolated(policy: Policy, observations: Sequence[Any]) -> list[tuple[str, Any]]:
    """``("actions", chunk)`` or ``("error", traceback)`` per observation.

    A native batch is one call; if it raises, each observation is asked alone, so the
    error reaches only the episodes whose own call fails. Without native batching each
    observation is asked alone from the start (no episode state is advanced twice).
    """
    if policy.capabilities.native_batching and len(observations) > 1:
        try:
            return [("actions", a) for a in guarded(policy.act_batch, observations)]
        except Exception:
            pass
    replies = []
    for obs in observations:
        try:
            replies.append(("actions", guarded(policy.act_batch, [obs])[0]))
        except Exception:
            replies.append(("error", bounded(traceback.format_exc())))
    return replies


def _drop_worker(policy: Policy, cfg: _Batching, conn: Connection,
                 open_episodes: dict[int, set[str]]) -> None:
    worker = cfg.workers.pop(conn)
    for episode_id in open_episodes.pop(worker, set()):
        try:
            guarded(policy.end_episode, episode_id)
        except Exception:
            pass


def _gpu_bytes(device: str) -> int:
    """GPU memory this replica holds (0 on CPU)."""
    if not device.startswith("cuda"):
        return 0
    import torch

    return int(torch.cuda.memory_reserved(torch.device(device)))


def _gpu_peak_bytes(device: str) -> int:
    """Peak GPU memory this replica reserved since the last call (0 on CPU)."""
    if not device.startswith("cuda"):
        return 0
    import torch

    peak = int(torch.cuda.max_memory_reserved(torch.device(device)))
    torch.cuda.reset_peak_memory_stats(torch.device(device))
    return peak


def _peak_rss() -> int:
    """This process's peak resident memory so far (Linux reports kilobytes)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss
