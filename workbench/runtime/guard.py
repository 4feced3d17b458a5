"""Calls into a policy, guarded, so that a policy cannot excuse its own failures.

Whatever happens inside the policy's code is the policy's: an exception of any type, a
``sys.exit`` or ``os._exit`` (which would otherwise end the process and be booked as a
dead process, the harness's fault), or a call that never returns. :func:`guarded` runs
one call with ``os._exit`` refused (it raises :class:`PolicyExited` instead of ending the
process) and ``SystemExit`` turned into :class:`PolicyExited`; :class:`CallGuard` does so
on a thread of its own, bounded by a time budget (:class:`PolicyTimeout`), and
:class:`GuardedPolicy` puts every lifecycle call of an in-process policy through one.

>>> guard = CallGuard(timeout_s=5)
>>> guard.call(lambda: sum(range(4)))
6
>>> import sys
>>> guard.call(sys.exit, 3)
Traceback (most recent call last):
...
workbench.contracts.results.PolicyExited: the policy called sys.exit(3)
>>> guard.close()
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
import traceback
from typing import Any, Callable, Iterator

from workbench.contracts.capabilities import Capabilities, EpisodeContext, LoadContext, Observation
from workbench.contracts.results import PolicyExited, PolicyTimeout

_exit_lock = threading.Lock()
_guarding = 0
_original_exit = os._exit


def _refused_exit(code: int = 0) -> None:
    caller = sys._getframe(1)
    raise _exited(f"the policy called os._exit({code})",
                  f"{caller.f_code.co_filename}:{caller.f_lineno}")


def _exited(message: str, where: str | None) -> PolicyExited:
    """The error, saying where the policy's code called the exit (``raised_at``, what
    :func:`~workbench.contracts.results.describe_exception` shows), not this module."""
    exc = PolicyExited(message)
    exc.raised_at = where
    return exc


@contextlib.contextmanager
def exits_refused() -> Iterator[None]:
    """While the block runs, ``os._exit`` raises :class:`PolicyExited` (and ``SystemExit``
    is turned into one). Re-entrant; the process's own ``os._exit`` is back afterwards."""
    global _guarding
    with _exit_lock:
        _guarding += 1
        os._exit = _refused_exit  # type: ignore[assignment]
    try:
        yield
    except SystemExit as exc:
        frames = traceback.extract_tb(exc.__traceback__)[-1:]
        raise _exited(f"the policy called sys.exit({exc.code!r})" if exc.code is not None
                      else "the policy called sys.exit()",
                      f"{frames[0].filename}:{frames[0].lineno}" if frames else None) from None
    finally:
        with _exit_lock:
            _guarding -= 1
            if _guarding == 0:
                os._exit = _original_exit


def guarded(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` with exits refused (see :func:`exits_refused`)."""
    with exits_refused():
        return call(*args)


class CallGuard:
    """Runs calls on one thread of its own (so thread-bound state a policy builds in
    ``load`` stays valid), each within ``timeout_s`` (None: unbounded, run inline). A
    call past its budget raises :class:`PolicyTimeout`; while it has not returned, every
    later call does so at once (the thread cannot be taken back from a hung policy; it is
    a daemon, so it never keeps the process alive)."""

    def __init__(self, timeout_s: float | None = None) -> None:
        self.timeout_s = timeout_s
        self._jobs: queue.Queue = queue.Queue()
        self._busy_since: float | None = None
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.timeout_s is None:
            return guarded(fn, *args)
        if self._busy_since is not None:
            raise PolicyTimeout(f"an earlier call of the policy has not returned for "
                                f"{time.monotonic() - self._busy_since:.0f} s")
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="policy-call", daemon=True)
            self._thread.start()
        done = threading.Event()
        box: dict[str, Any] = {}
        self._busy_since = time.monotonic()
        self._jobs.put((fn, args, box, done))
        if not done.wait(self.timeout_s):
            raise PolicyTimeout(f"the policy's call did not return within {self.timeout_s:g} s "
                                "(policy_call_timeout_s)")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, box, done = job
            try:
                box["value"] = guarded(fn, *args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
                box["error"] = exc
            finally:
                self._busy_since = None
                done.set()

    def close(self) -> None:
        """End the thread once its call, if any, returns."""
        if self._thread is not None:
            self._jobs.put(None)


class GuardedPolicy:
    """An in-process policy whose every lifecycle call goes through a :class:`CallGuard`
    (the step loop sees the same ``capabilities``, ``reset``, ``act``, ``act_batch``,
    ``end_episode``)."""

    def __init__(self, policy: Any, timeout_s: float | None) -> None:
        self.policy, self.guard = policy, CallGuard(timeout_s)

    @property
    def capabilities(self) -> Capabilities:
        return self.policy.capabilities

    @property
    def name(self) -> str:
        return self.policy.name

    def load(self, context: LoadContext) -> Any:
        return self.guard.call(self.policy.load, context)

    def reset(self, context: EpisodeContext) -> None:
        self.guard.call(self.policy.reset, context)

    def act(self, observation: Observation) -> Any:
        return self.guard.call(self.policy.act, observation)

    def act_batch(self, observations: list[Observation]) -> Any:
        return self.guard.call(self.policy.act_batch, observations)

    def end_episode(self, episode_id: str) -> None:
        self.guard.call(self.policy.end_episode, episode_id)

    def unload(self) -> None:
        """Unload if the policy can be unloaded (a policy stuck in a call cannot)."""
        try:
            self.guard.call(self.policy.unload)
        finally:
            self.guard.close()


def unreachable(policy: Any) -> str | None:
    """Why the policy cannot take an episode now (a policy server that is gone), or None.

    Asked before each claim by the backends that run the policy in their own process, so
    a dead policy server stops the run, leaving the rest unattempted, instead of burning
    every remaining case as an infrastructure error. A policy without the hook
    (``unreachable()``) is always reachable."""
    inner = policy.policy if isinstance(policy, GuardedPolicy) else policy
    probe = getattr(inner, "unreachable", None)
    return probe() if callable(probe) else None


def release(policy: Any) -> None:
    """End the policy's open episodes and unload it, so its processes, files and GPU
    memory go (a :class:`GuardedPolicy` or a plain one). Best effort: a policy that fails
    here, or is stuck in a call, changes no recorded outcome."""
    inner = policy.policy if isinstance(policy, GuardedPolicy) else policy
    try:
        for episode_id in list(getattr(inner, "_episodes", {})):
            (policy.end_episode if isinstance(policy, GuardedPolicy)
             else lambda e: guarded(inner.end_episode, e))(episode_id)
        policy.unload() if isinstance(policy, GuardedPolicy) else guarded(inner.unload)
    except Exception:
        pass
    finally:
        if isinstance(policy, GuardedPolicy):
            policy.guard.close()
