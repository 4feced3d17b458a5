"""Every call into a served policy, on one thread, with actions batched across
connections.

A policy is not assumed thread-safe, so one daemon thread makes all its calls (load,
reset, act, end_episode, unload), each connection's in the order it sent them (a
connection waits for each reply before its next call). Observations from all connections
wait together: the thread takes the first, then gathers more until ``max_batch`` are
waiting, or as many as there are connections that could send one (``senders``: a lone
client never waits), or ``max_wait_ms`` has passed (running any other call that arrives
meanwhile, such as another connection's ``reset``, so that connection's first
observation can still join), and hands the lot to ``act_batch`` once (each observation
carries its own connection's ``episode_id``, so every connection keeps its own episode
state). When a batch raises, its observations are served again one at a time, so only
the connection whose observation made the policy fail gets the error. A call that has
not returned after ``call_timeout_s`` fails for its caller (:class:`PolicyStuck`), and
so does every later call while it lasts (the thread cannot be taken back from a hung
policy; being a daemon, it does not keep the process alive when the server stops).

>>> from workbench.policies import make_policy
>>> from workbench.contracts.capabilities import EpisodeContext, LoadContext
>>> calls = PolicyCalls(make_policy("zero", protocol="metaworld-v1"))
>>> _ = calls.call("load", LoadContext("metaworld-v1")).result(5)
>>> _ = calls.call("reset", EpisodeContext("e0", "t", "", 0)).result(5)
>>> calls.act({"episode_id": "e0", "state": None}).result(5).tolist()
[0.0, 0.0, 0.0, 0.0]
>>> calls.stats()["batches"]
{'1': 1}
>>> calls.stop()
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from workbench.errors import PolicyError
from workbench.policies.base import Policy
from workbench.runtime.guard import guarded


class PolicyStuck(PolicyError):
    """A policy call has not returned within the server's time limit."""


@dataclass
class _Call:
    method: str
    args: tuple[Any, ...]
    future: Future = field(default_factory=Future)


_STOP = _Call("stop", ())


class PolicyCalls:
    """The thread that calls ``policy``; see the module."""

    def __init__(self, policy: Policy, max_batch: int = 8, max_wait_ms: float = 5.0,
                 call_timeout_s: float = 60.0,
                 senders: Callable[[], int] | None = None) -> None:
        self.policy, self.max_batch = policy, max(1, int(max_batch))
        self.senders = senders or (lambda: self.max_batch)
        self.max_wait_s, self.call_timeout_s = max_wait_ms / 1000.0, call_timeout_s
        self._queue: queue.Queue[_Call] = queue.Queue()
        self._lock = threading.Lock()
        self._busy_since: float | None = None
        self._counts: Counter[str] = Counter()
        self._batches: Counter[int] = Counter()
        self._thread = threading.Thread(target=self._serve, name="policy-calls", daemon=True)
        self._thread.start()

    # -- submitting ------------------------------------------------------------------
    def call(self, method: str, *args: Any) -> Future:
        """``policy.<method>(*args)`` on the policy thread; its future."""
        return self._submit(_Call(method, args))

    def act(self, observation: dict[str, Any]) -> Future:
        """One observation's action (batched with others waiting); its future."""
        return self._submit(_Call("act", (observation,)))

    def _submit(self, item: _Call) -> Future:
        stuck = self.stuck_for()
        if stuck is not None and stuck > self.call_timeout_s:
            self._count("refused_while_stuck")
            item.future.set_exception(PolicyStuck(
                f"the policy has been in one call for {stuck:.0f} s (limit "
                f"{self.call_timeout_s:g} s); the server cannot serve it"))
        else:
            self._queue.put(item)
        return item.future

    def stuck_for(self) -> float | None:
        """Seconds the current call has run (None when the thread is idle)."""
        with self._lock:
            return None if self._busy_since is None else time.monotonic() - self._busy_since

    # -- the thread ------------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if item.method != "act":
                self._run(item)
                continue
            batch, stopping = self._gather(item)
            self._act(batch)
            if stopping:
                return

    def _gather(self, first: _Call) -> tuple[list[_Call], bool]:
        """``first`` and the observations that arrive within the wait, and whether a stop
        came meanwhile. Other calls that arrive meanwhile (a connection's ``reset``) run at
        once: the connection sending one has no observation waiting, and its first
        observation, sent when the reset returns, can still join this batch."""
        batch = [first]
        deadline = time.monotonic() + self.max_wait_s
        while len(batch) < min(self.max_batch, max(1, self.senders())):
            left = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            if item.method == "act":
                batch.append(item)
            else:
                self._run(item)
        return batch, False

    def _act(self, batch: list[_Call]) -> None:
        live = [c for c in batch if c.future.set_running_or_notify_cancel()]
        if not live:
            return
        self._batches[len(live)] += 1
        try:
            actions = self._timed(self.policy.act_batch, [c.args[0] for c in live])
            if len(actions) != len(live):
                raise RuntimeError(f"act_batch returned {len(actions)} actions for "
                                   f"{len(live)} observations")
        except Exception as exc:
            if len(live) == 1:  # its own fault, already alone
                self._count("calls_failed")
                live[0].future.set_exception(exc)
                return
            self._count("batches_retried_one_by_one")
            for call in live:
                try:
                    call.future.set_result(self._timed(self.policy.act, call.args[0]))
                except Exception as exc:
                    call.future.set_exception(exc)
            return
        for call, action in zip(live, actions):
            call.future.set_result(action)

    def _run(self, item: _Call) -> None:
        if not item.future.set_running_or_notify_cancel():
            return
        try:
            item.future.set_result(self._timed(getattr(self.policy, item.method), *item.args))
        except Exception as exc:
            item.future.set_exception(exc)

    def _timed(self, method: Any, *args: Any) -> Any:
        with self._lock:
            self._busy_since = time.monotonic()
        try:
            return guarded(method, *args)  # a policy's sys.exit or os._exit: its error
        finally:
            with self._lock:
                self._busy_since = None

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    # -- reading and stopping -----------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counters: ``batches`` (batch size -> batches of that size, as strings for
        JSON), ``observations`` served, ``largest_batch``, and the exceptional paths."""
        with self._lock:
            batches = dict(self._batches)
            counts = dict(self._counts)
        return {"batches": {str(k): v for k, v in sorted(batches.items())},
                "observations": sum(k * v for k, v in batches.items()),
                "largest_batch": max(batches, default=0), **counts}

    def stop(self, timeout_s: float = 2.0) -> None:
        """Let queued calls finish and end the thread, waiting at most ``timeout_s``."""
        self._queue.put(_STOP)
        self._thread.join(timeout_s)
