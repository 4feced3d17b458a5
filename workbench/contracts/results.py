"""Episode results and who is to blame when an episode fails.

Error kinds keep infrastructure apart from task failure:

- no error: the episode ran; ``success`` says how it went;
- :attr:`ErrorKind.POLICY`: the policy raised, or broke the action contract. A failure
  of the policy; it counts as a failed episode in success rates;
- :attr:`ErrorKind.INFRASTRUCTURE`: the harness failed (a render, a transport, a dead
  simulator or replica process, an interrupted run). Left out of success rates.

>>> EpisodeResult(False, None, 12, 0.5, ErrorKind.POLICY, "raised").error_kind == "policy"
True
>>> EpisodeResult(False, None, 0, 0.0, "oops")
Traceback (most recent call last):
...
ValueError: error_kind: expected one of [None, 'policy', 'infrastructure']; got 'oops'
"""

from __future__ import annotations

import enum
import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd

from workbench.errors import InfrastructureError, PolicyError, WorkbenchError


class ErrorKind(str, enum.Enum):
    """Who failed: the policy or the harness. Compares equal to its stored string."""

    POLICY = "policy"
    INFRASTRUCTURE = "infrastructure"

    def __str__(self) -> str:
        return self.value


class PolicyTimeout(PolicyError):
    """A policy call did not return within its time budget: the policy's failure."""


class PolicyExited(PolicyError):
    """The policy's code tried to end its process (``sys.exit``, ``os._exit``)."""


class PolicyLoadFailed(PolicyError):
    """The policy's constructor or ``load`` raised, so no episode can run: the run stops
    before claiming one (nothing is recorded as attempted), naming the policy's error."""

    @classmethod
    def of(cls, policy: str, what: str) -> "PolicyLoadFailed":
        """The error for policy ``policy`` whose load failed with ``what``.

        >>> str(PolicyLoadFailed.of("vision", "OSError: no such checkpoint"))
        "policy 'vision' did not load: OSError: no such checkpoint"
        """
        return cls(f"policy {policy!r} did not load: {what}")


def blames_the_policy_load(exc: BaseException) -> bool:
    """Whether ``exc``, raised while a policy was built or loaded, is the policy's failure
    (:class:`PolicyLoadFailed`), not one the workbench already names: a ConfigError or
    ContractError of its own checks, or an InfrastructureError of its own code (see
    :func:`policy_blame`).

    >>> blames_the_policy_load(MemoryError()), blames_the_policy_load(PolicyExited("exit"))
    (True, True)
    >>> from workbench.errors import ConfigError
    >>> blames_the_policy_load(ConfigError("policy_options.width: expected an integer"))
    False
    """
    if isinstance(exc, WorkbenchError) and isinstance(exc, ValueError):
        return False
    return policy_blame(exc) is ErrorKind.POLICY


@contextmanager
def load_blamed_on(policy: str) -> Iterator[None]:
    """Inside the block (a policy built or loaded), an error of the policy's own code is
    raised as :class:`PolicyLoadFailed` naming ``policy``; one the workbench already names
    (see :func:`blames_the_policy_load`) passes through unchanged.

    >>> try:
    ...     with load_blamed_on("vision"):
    ...         raise OSError("no such checkpoint")
    ... except PolicyLoadFailed as exc:
    ...     str(exc).split(" at ")[0]
    "policy 'vision' did not load: OSError: no such checkpoint"
    """
    try:
        yield
    except Exception as exc:
        if not blames_the_policy_load(exc):
            raise
        raise PolicyLoadFailed.of(policy, describe_exception(exc)) from exc


def policy_blame(exc: BaseException) -> "ErrorKind":
    """Who failed when a call into the policy raised ``exc``: the harness only for an
    InfrastructureError the workbench's own code raised (a transport of a remote policy,
    a dead replica); anything else, whatever its type (MemoryError, SystemExit, an
    InfrastructureError a policy built itself), is the policy's.

    >>> policy_blame(InfrastructureError("transport")).value, policy_blame(MemoryError()).value
    ('infrastructure', 'policy')
    """
    if isinstance(exc, InfrastructureError) and getattr(exc, "harness", False):
        return ErrorKind.INFRASTRUCTURE
    return ErrorKind.POLICY


TERMINATIONS = ("success", "step_limit", "native_end", "policy_stop", "call_budget", "error")
"""Why an episode ended: first success; the step limit (the run's ``max_steps`` or the
benchmark's own); the benchmark ended it without success; the policy stopped; the
policy-call budget ran out; an error (see ``error_kind``)."""


@dataclass(frozen=True)
class EpisodeResult:
    """What one finished episode recorded.

    terminal_step: step of first success, else None. steps: environment steps taken
    (controls executed). policy_calls: times the policy was asked for actions;
    observations: observations read (every step when observing every step, else at
    chunk boundaries); decisions: policy calls after which at least one control
    executed; rejections: actions refused before execution (feedback mode);
    termination: why the episode ended (:data:`TERMINATIONS`); interactions_path: the
    episode's interaction history file, when recorded.
    """

    success: bool
    terminal_step: int | None
    steps: int
    wall_s: float
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    video_path: str | None = None
    rollout_path: str | None = None
    policy_calls: int = 0
    observations: int = 0
    decisions: int = 0
    rejections: int = 0
    termination: str | None = None
    interactions_path: str | None = None
    progress: float | None = None

    def __post_init__(self) -> None:
        if self.error_message is not None:
            object.__setattr__(self, "error_message", bounded(self.error_message))
        if self.error_kind is not None:
            try:
                object.__setattr__(self, "error_kind", ErrorKind(self.error_kind))
            except ValueError:
                allowed = [None] + [k.value for k in ErrorKind]
                raise ValueError(f"error_kind: expected one of {allowed}; "
                                 f"got {self.error_kind!r}") from None

    @classmethod
    def failed(cls, kind: ErrorKind, message: str, steps: int = 0,
               wall_s: float = 0.0) -> "EpisodeResult":
        """An episode that ended in an error before it could succeed."""
        return cls(False, None, steps, wall_s, kind, message, termination="error")


MAX_MESSAGE_CHARS = 4096
"""Longest error message an episode records; a longer one is cut and says so."""


def bounded(text: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` as a string of at most about ``limit`` characters, marked when cut.

    >>> bounded("x" * 10, 4)
    'xxxx [cut: 6 more characters]'
    """
    text = text if isinstance(text, str) else str(text)
    return text if len(text) <= limit else f"{text[:limit]} [cut: {len(text) - limit} more characters]"


def out_of_memory(exc: BaseException) -> bool:
    """Memory ran out (the host's, or CUDA's). Inside the policy's code that is the
    policy's failure like any other; the concurrency search reads it to fail a probe
    that packed too many replicas or workers on a device.

    >>> out_of_memory(MemoryError()), out_of_memory(ValueError("out of memory"))
    (True, False)
    """
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")  # a CUDA error needs torch already imported
    return torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError)


def describe_exception(exc: BaseException) -> str:
    """``Type: message at file:line`` of where it was raised.

    >>> try:
    ...     raise KeyError("x")
    ... except KeyError as exc:
    ...     describe_exception(exc).split(" at ")[0]
    "KeyError: 'x'"
    """
    try:
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
        if isinstance(getattr(exc, "raised_at", None), str):  # a guard's error: the policy's line
            where = f" at {exc.raised_at}"
    except Exception:  # a traceback that cannot be read says nothing of where
        where = ""
    return bounded(f"{type(exc).__name__}: {exception_text(exc)}{where}")


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or a note when even that raises (a hostile ``__str__``).

    >>> class Hostile(Exception):
    ...     def __str__(self):
    ...         raise RuntimeError("no")
    >>> exception_text(Hostile())
    '(its message could not be read: RuntimeError)'
    """
    try:
        text = str(exc)
    except BaseException as inner:  # noqa: BLE001 - whatever it raises, the run goes on
        return f"(its message could not be read: {type(inner).__name__})"
    return text if isinstance(text, str) else "(its message is not a string)"


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Per-task table of a results frame (one row per episode, as records store them).

    Columns: task, episodes, successes, success_rate (infrastructure errors left
    out), mean_terminal_step (of successes), policy_errors, infra_errors; a last
    row ``ALL`` sums the tasks.

    >>> df = pd.DataFrame({"task": ["a", "a", "b"], "episode_id": ["1", "2", "3"],
    ...                    "status": "finished", "success": [True, False, True],
    ...                    "terminal_step": [5, None, 9],
    ...                    "error_kind": [None, "infrastructure", None]})
    >>> summarize(df)[["task", "successes", "success_rate", "infra_errors"]].values.tolist()
    [['a', 1, 1.0, 1], ['b', 1, 1.0, 0], ['ALL', 2, 1.0, 1]]
    """
    df = results.copy()
    df["infra"] = df["error_kind"].eq(ErrorKind.INFRASTRUCTURE.value)
    df["policy_err"] = df["error_kind"].eq(ErrorKind.POLICY.value)
    scored = df[~df["infra"] & df["status"].eq("finished")]
    by_task = df.groupby("task").agg(episodes=("episode_id", "size"),
                                     policy_errors=("policy_err", "sum"),
                                     infra_errors=("infra", "sum"))
    scores = scored.groupby("task").agg(successes=("success", "sum"),
                                        scored=("success", "size"),
                                        mean_terminal_step=("terminal_step", "mean"))
    table = by_task.join(scores, how="left").fillna({"successes": 0, "scored": 0})
    table["success_rate"] = np.where(table["scored"] > 0,
                                     table["successes"] / table["scored"].clip(lower=1), np.nan)
    table = table.reset_index()[["task", "episodes", "successes", "success_rate",
                                 "mean_terminal_step", "policy_errors", "infra_errors"]]
    total = pd.DataFrame([{
        "task": "ALL", "episodes": int(table["episodes"].sum()),
        "successes": int(table["successes"].sum()),
        "success_rate": scored["success"].mean() if len(scored) else np.nan,
        "mean_terminal_step": scored["terminal_step"].mean(),
        "policy_errors": int(table["policy_errors"].sum()),
        "infra_errors": int(table["infra_errors"].sum())}])
    return pd.concat([table, total], ignore_index=True).astype(
        {"episodes": int, "successes": int, "policy_errors": int, "infra_errors": int})
