"""Checkers for extenders, as Gymnasium's ``env_checker``: does a new benchmark adapter or
policy keep the contracts the runtime relies on? Each check runs the component itself
(no runtime, no pool) and returns a :class:`CheckReport`: one line per property, passed
or failed with what was expected and what came back. ``workbench check-adapter`` and
``workbench check-policy`` print it and exit 1 on a failure.

:func:`check_adapter`: it declares a name, a protocol (registered or its own; the name
resolves to the same action contract, which policies act on), a step limit and its
suites' tasks; every declared feature is observed with its dtype and shape,
and a request for some features returns exactly those; a step within the action bounds
returns a finite reward and boolean success and done; the same episode (task, initial
state, seed) with the same actions gives the same trajectory and rewards.

:func:`check_policy`: the lifecycle in order (``act`` before ``reset`` refused, then
load, reset, act, end_episode, unload); the declared features exist in the protocol and
the action protocol is the protocol's; every action meets the action contract with the
declared chunk size; the same episode seed and observations give the same actions; with
native batching declared, ``act_batch`` equals one call at a time.

>>> from workbench.policies import make_policy
>>> print(check_policy(make_policy("zero", protocol="metaworld-v1"), "metaworld-v1").summary())
check-policy zero on metaworld-v1: 6 passed, 0 failed
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from workbench.benchmarks import BenchmarkAdapter, benchmark_class, make_benchmark
from workbench.benchmarks.base import StepResult, check_compatibility
from workbench.contracts.capabilities import Capabilities, EpisodeContext, LoadContext, Stop
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import (Protocol, get_protocol, sample_observation,
                                           validate_action, validate_observation)
from workbench.policies import LifecycleError, Policy, State


@dataclass(frozen=True)
class Check:
    """One property: its name, whether it held, and what was found when it did not."""

    name: str
    passed: bool
    detail: str = ""

    def line(self) -> str:
        mark = "ok  " if self.passed else "FAIL"
        return f"{mark} {self.name}" + (f": {self.detail}" if self.detail else "")


@dataclass
class CheckReport:
    """The checks of one component, in the order they ran."""

    subject: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def run(self, name: str, check: Callable[[], str | None]) -> bool:
        """Run ``check`` (it raises, or returns a failure text, or None when it held)."""
        try:
            problem = check()
        except Exception as exc:  # what the component raised is the finding
            problem = f"{type(exc).__name__}: {exc}"
        self.checks.append(Check(name, problem is None, (problem or "")[:500]))
        return problem is None

    def summary(self) -> str:
        return (f"{self.subject}: {len(self.checks) - len(self.failures)} passed, "
                f"{len(self.failures)} failed")

    def text(self) -> str:
        return "\n".join([*(c.line() for c in self.checks), self.summary()])


def _expect(held: bool, what: str, expected: Any, got: Any) -> str | None:
    return None if held else f"{what}: expected {expected}; got {got}"


def _actions(protocol: Protocol, count: int, seed: int) -> list[np.ndarray]:
    """``count`` actions drawn within the action contract's bounds (finite ones; +-1
    where a bound is open)."""
    low, high = protocol.action.bounds()
    low, high = np.where(np.isfinite(low), low, -1.0), np.where(np.isfinite(high), high, 1.0)
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high).astype(protocol.action.dtype) for _ in range(count)]


# -- adapters ------------------------------------------------------------------------------
def check_adapter(adapter: BenchmarkAdapter | str | type, suite: str | None = None,
                  steps: int = 5, **options: Any) -> CheckReport:
    """Check an adapter instance, or build one from a name, import path or class
    (``suite`` and ``options`` passed to it; image_size 32 unless given) and close it after."""
    built = not isinstance(adapter, BenchmarkAdapter)
    if not built:
        benchmark_class(type(adapter))  # registers a protocol it carries, as a run does
    if built:
        if suite is not None:
            options["suite"] = suite
        options.setdefault("image_size", 32)
        adapter = make_benchmark(adapter, **options)
    report = CheckReport(f"check-adapter {getattr(adapter, 'name', type(adapter).__name__)}")
    try:
        _adapter_checks(report, adapter, steps)
    finally:
        if built:
            adapter.close()
    return report


def _adapter_checks(report: CheckReport, adapter: BenchmarkAdapter, steps: int) -> None:
    if not report.run("declares a name, a protocol, a step limit, its suite and tasks",
                      lambda: _declarations(adapter)):
        return
    protocol, task = adapter.protocol, adapter.tasks()[0]
    report.run("its protocol's name resolves to the same action contract", lambda: _expect(
        get_protocol(protocol.name).action == protocol.action,
        f"get_protocol({protocol.name!r}).action", protocol.action,
        get_protocol(protocol.name).action))
    spec = EpisodeSpec(adapter.name, adapter.suite, task, 0, 0)
    if not report.run("reset, then every declared feature observed, typed as declared",
                      lambda: _observes_all(adapter, spec)):
        return
    report.run("observe returns exactly the features asked for",
               lambda: _observes_subset(adapter, protocol))
    report.run("a step within the action bounds returns a finite reward, bool success "
               "and done", lambda: _steps(adapter, protocol))
    report.run("trajectory_state is a 1-D float32 vector",
               lambda: _trajectory_state(adapter))
    report.run("the same episode and actions give the same trajectory and rewards",
               lambda: _repeatable(adapter, spec, steps))


def _declarations(adapter: BenchmarkAdapter) -> str | None:
    if not isinstance(getattr(adapter, "protocol", None), Protocol):
        return _expect(False, "protocol", "a workbench Protocol",
                       type(getattr(adapter, "protocol", None)).__name__)
    max_steps = getattr(adapter, "max_steps", None)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        return _expect(False, "max_steps", "an integer >= 1", repr(max_steps))
    if adapter.suite not in adapter.list_suites():
        return _expect(False, "suite", f"one of {adapter.list_suites()}", repr(adapter.suite))
    tasks = adapter.tasks()
    if not tasks:
        return _expect(False, "tasks()", "at least one task", "none")
    text = adapter.instruction(tasks[0])
    return _expect(isinstance(text, str) and bool(text.strip()), f"instruction({tasks[0]!r})",
                   "a non-empty string", repr(text))


def _observes_all(adapter: BenchmarkAdapter, spec: EpisodeSpec) -> str | None:
    adapter.reset(spec)
    names = adapter.protocol.feature_names
    obs = adapter.observe(names)
    validate_observation(adapter.protocol, obs, names)
    return None


def _observes_subset(adapter: BenchmarkAdapter, protocol: Protocol) -> str | None:
    for names in ([protocol.feature_names[0]], list(protocol.feature_names[1:])):
        got = sorted(adapter.observe(names))
        if got != sorted(names):
            return _expect(False, f"observe({names})", sorted(names), got)
    return None


def _steps(adapter: BenchmarkAdapter, protocol: Protocol) -> str | None:
    result = adapter.step(validate_action(protocol, _actions(protocol, 1, 0)[0])[0])
    if not isinstance(result, StepResult):
        return _expect(False, "step()", "a StepResult", type(result).__name__)
    if not (isinstance(result.reward, (int, float)) and math.isfinite(result.reward)):
        return _expect(False, "reward", "a finite number", repr(result.reward))
    bools = {k: v for k, v in (("success", result.success), ("done", result.done))
             if not isinstance(v, (bool, np.bool_))}
    return _expect(not bools, "success and done", "bools", bools)


def _trajectory_state(adapter: BenchmarkAdapter) -> str | None:
    state = np.asarray(adapter.trajectory_state())
    return _expect(state.ndim == 1 and state.dtype == np.float32, "trajectory_state()",
                   "a 1-D float32 array", f"{state.dtype} of shape {state.shape}")


def _repeatable(adapter: BenchmarkAdapter, spec: EpisodeSpec, steps: int) -> str | None:
    actions = _actions(adapter.protocol, steps, 1)

    def play() -> tuple[list[np.ndarray], list[float]]:
        adapter.reset(spec)
        states, rewards = [np.asarray(adapter.trajectory_state()).copy()], []
        for action in actions:
            result = adapter.step(action)
            states.append(np.asarray(adapter.trajectory_state()).copy())
            rewards.append(float(result.reward))
            if result.done:
                break
        return states, rewards

    (s1, r1), (s2, r2) = play(), play()
    same = len(s1) == len(s2) and all(np.array_equal(a, b) for a, b in zip(s1, s2))
    step = next((k for k, (a, b) in enumerate(zip(s1, s2)) if not np.array_equal(a, b)), None)
    return _expect(same and r1 == r2, f"{spec.episode_id} played twice", "identical states "
                   "and rewards", f"a difference at step {step}" if step is not None
                   else f"rewards {r1} and {r2}")


# -- policies ------------------------------------------------------------------------------
def check_policy(policy: Policy, protocol: Protocol | str, episodes: int = 2,
                 steps: int = 3, task: str = "check-task") -> CheckReport:
    """Check ``policy`` (a fresh :class:`~workbench.policies.Policy`, not loaded) against
    ``protocol`` (a Protocol or a name) on zero observations of the protocol's features,
    in episodes of ``task`` (a policy that knows its tasks needs a real one); it is
    unloaded at the end."""
    protocol = get_protocol(protocol) if isinstance(protocol, str) else protocol
    report = CheckReport(f"check-policy {getattr(policy, 'name', type(policy).__name__)} on "
                         f"{protocol.name}")
    if not report.run("act before reset is refused (LifecycleError)",
                      lambda: _refuses_early_act(policy, protocol)):
        return report
    caps: list[Capabilities] = []
    if not report.run("load returns Capabilities",
                      lambda: _loads(policy, protocol, caps)):
        return report
    try:
        report.run("declared features and action protocol are the protocol's",
                   lambda: check_compatibility(protocol, caps[0]))
        report.run(f"every action meets {protocol.name}'s action contract with chunk size "
                   f"{caps[0].chunk_size}",
                   lambda: _acts_in_contract(policy, protocol, caps[0], episodes, steps, task))
        report.run("the same episode seed and observations give the same actions",
                   lambda: _same_actions(policy, protocol, steps, task))
        report.run("act_batch equals one call at a time" + (
            "" if caps[0].native_batching else " (no native batching declared)"),
                   lambda: _batch_equals_single(policy, protocol, steps, task))
    finally:
        if policy.state is State.LOADED:  # every episode was ended where it began
            policy.unload()
    return report


def _observation(protocol: Protocol, episode_id: str, step: int) -> dict[str, Any]:
    return sample_observation(protocol) | {"episode_id": episode_id, "step": step}


def _context(episode_id: str, seed: int, task: str) -> EpisodeContext:
    return EpisodeContext(episode_id, task, "do the task", seed)


def _refuses_early_act(policy: Policy, protocol: Protocol) -> str | None:
    try:
        policy.act(_observation(protocol, "early", 0))
    except LifecycleError:
        return None
    return _expect(False, "act() before load and reset", "a LifecycleError", "an action")


def _loads(policy: Policy, protocol: Protocol, out: list[Capabilities]) -> str | None:
    caps = policy.load(LoadContext(protocol.name))
    out.append(caps)
    return _expect(isinstance(caps, Capabilities), "load()", "Capabilities",
                   type(caps).__name__)


def _episode(policy: Policy, protocol: Protocol, episode_id: str, seed: int,
             steps: int, task: str) -> list[np.ndarray]:
    policy.reset(_context(episode_id, seed, task))
    try:
        actions = []
        for step in range(steps):
            out = policy.act(_observation(protocol, episode_id, step))
            if isinstance(out, Stop):
                break
            actions.append(np.asarray(out))
        return actions
    finally:
        policy.end_episode(episode_id)


def _acts_in_contract(policy: Policy, protocol: Protocol, caps: Capabilities,
                      episodes: int, steps: int, task: str) -> str | None:
    dim = protocol.action.dim
    want = (dim,) if caps.chunk_size == 1 else (caps.chunk_size, dim)
    for k in range(episodes):
        for action in _episode(policy, protocol, f"check/{k}", k, steps, task):
            validate_action(protocol, action)
            if action.shape != want and not (caps.chunk_size == 1 and action.shape == (1, dim)):
                return _expect(False, "an action's shape", want, action.shape)
    return None


def _same_actions(policy: Policy, protocol: Protocol, steps: int, task: str) -> str | None:
    first = _episode(policy, protocol, "check/same-a", 7, steps, task)
    again = _episode(policy, protocol, "check/same-b", 7, steps, task)
    same = len(first) == len(again) and all(np.array_equal(a, b) for a, b in zip(first, again))
    return _expect(same, "two episodes of seed 7", "identical actions", "different actions")


def _batch_equals_single(policy: Policy, protocol: Protocol, steps: int,
                         task: str) -> str | None:
    ids = [f"check/batch-{k}" for k in range(2)]
    for k, episode_id in enumerate(ids):
        policy.reset(_context(episode_id, 100 + k, task))
    try:
        batched = [policy.act_batch([_observation(protocol, e, s) for e in ids])
                   for s in range(steps)]
    finally:
        for episode_id in ids:
            policy.end_episode(episode_id)
    singles = [_episode(policy, protocol, f"check/single-{k}", 100 + k, steps, task)
               for k in range(2)]
    for s, row in enumerate(batched):
        for k, action in enumerate(row):
            if s < len(singles[k]) and not np.allclose(np.asarray(action), singles[k][s],
                                                       atol=1e-5):
                return _expect(False, f"act_batch at step {s}, episode {k}",
                               "the action of one call at a time", "another action")
    return None
