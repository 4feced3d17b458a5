"""One episode, stepped in-process: the one step loop of the workbench.

:class:`EpisodeStepper` is the only code that calls an adapter's ``step``, and
:func:`run_episode` drives it with a policy. Every runtime
(the sequential backend, each pool worker, each Ray shard) runs episodes through it,
and whatever else wants to watch an episode (rollout and video recorders, profilers,
demonstration collectors, frame replays) attaches an :class:`EpisodeObserver` instead
of stepping on its own.

``observe_every_step=True`` is the official-like behaviour (an observation read at
every step whether the policy reads it or not); ``False`` reads only when the policy
is about to act (at action-chunk boundaries). Both give the policy the same
observations at the steps it reads, so outcomes are identical.

Who is to blame: a failure to reset, render, read or step the environment, or an
observation that breaks the benchmark's own protocol, is an infrastructure error.
Whatever the policy's code does is the policy's: an exception of any type (a
``MemoryError``, a ``SystemExit``, an ``InfrastructureError`` it built itself), an
action that breaks the contract, a call past its time budget
(:mod:`workbench.runtime.guard`). Only an
:class:`~workbench.contracts.results.InfrastructureError` the workbench's own code
raised on the policy's side (a dead replica, a transport that failed) is the harness's
(:func:`~workbench.contracts.results.policy_blame`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, StepResult
from workbench.contracts.capabilities import EpisodeContext, Stop
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import (ActionRejected, ContractError, validate_action,
                                          validate_observation)
from workbench.contracts.results import (EpisodeResult, ErrorKind, InfrastructureError,
                                         describe_exception, exception_text, policy_blame)
from workbench.records.media import episode_filename, write_video
from workbench.records.rollout import Rollout, save_rollout

CAMERA_PREFIX = "images."


class EpisodeObserver:
    """Watches episodes through the step loop. Every method is optional (a no-op here).

    The loop calls, in order: :meth:`on_reset` once; then per step, when it reads an
    observation, :meth:`on_observe`; when the policy is asked, :meth:`on_act` (or
    :meth:`on_stop`); :meth:`on_reject` when an action is refused unexecuted; then
    :meth:`before_step` and :meth:`after_step` around the environment step; finally
    :meth:`on_end` with the episode's result. Observers must not step the adapter.
    """

    def on_reset(self, adapter: BenchmarkAdapter, spec: EpisodeSpec, seconds: float) -> None:
        """The environment was reset to ``spec``'s initial state, taking ``seconds``."""

    def on_observe(self, adapter: BenchmarkAdapter, step: int, observation: dict[str, Any],
                   render_s: float, read_s: float) -> None:
        """An observation was read: cameras rendered in ``render_s``, the rest in ``read_s``."""

    def on_act(self, step: int, observation: dict[str, Any], actions: Any,
               seconds: float) -> None:
        """The policy returned ``actions`` for ``observation`` in ``seconds``: a valid
        (k, dim) chunk, or whatever it proposed when that breaks the contract (then
        :meth:`on_reject` or the episode's end follows)."""

    def on_reject(self, step: int, message: str) -> None:
        """The proposed chunk (or its next control) was refused without executing
        (feedback mode); ``message`` goes to the policy's next call."""

    def on_stop(self, step: int, observation: dict[str, Any], reason: str) -> None:
        """The policy returned a Stop instead of actions."""

    def before_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray) -> None:
        """``action`` is about to be applied; the adapter still shows the pre-step state."""

    def after_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray,
                   result: StepResult, seconds: float) -> None:
        """``action`` was applied, taking ``seconds``."""

    def on_end(self, adapter: BenchmarkAdapter, spec: EpisodeSpec,
               result: EpisodeResult) -> None:
        """The episode ended with ``result``."""


def episode_context(adapter: BenchmarkAdapter, spec: EpisodeSpec) -> EpisodeContext:
    return EpisodeContext(spec.episode_id, spec.task, adapter.instruction(spec.task), spec.seed)


def warm_up(adapter: BenchmarkAdapter, plan: Sequence[EpisodeSpec],
            features: Sequence[str]) -> float:
    """Build the environments and renderers ``plan``'s tasks need; returns seconds."""
    start = time.perf_counter()
    for spec in {s.task: s for s in sorted(plan, reverse=True)}.values():
        adapter.reset(spec)
        adapter.observe(features)
    return time.perf_counter() - start


def run_episode(adapter: BenchmarkAdapter, policy: Any, spec: EpisodeSpec,
                observe_every_step: bool = True,
                observers: Sequence[EpisodeObserver] = (),
                max_steps: int | None = None, feedback: bool = False,
                max_policy_calls: int | None = None) -> EpisodeResult:
    """Run one episode to success, truncation, a stop or an error; never raises for its faults.

    ``policy`` is a loaded Policy or anything with the same ``capabilities``, ``reset``,
    ``act`` and ``end_episode`` (a pool worker's proxy to a remote replica).
    max_steps caps the episode below the adapter's own limit (None: the adapter's).
    feedback: an action that breaks the contract, or that the benchmark refuses
    (:class:`~workbench.contracts.protocols.ActionRejected`), is not executed; its
    message goes to the policy's next call with the last acknowledged observation
    (``observation["feedback"]``) instead of ending the episode as a policy error.
    max_policy_calls: the call budget (None: unlimited, or twice the step limit in
    feedback mode, so a policy whose actions are always refused still ends).
    """
    stepper = EpisodeStepper(adapter, spec, observers)
    limit = adapter.max_steps if max_steps is None else min(max_steps, adapter.max_steps)
    if feedback and max_policy_calls is None:
        max_policy_calls = 2 * limit
    loop = _Loop(stepper, policy, observe_every_step, limit, feedback, max_policy_calls)
    start = time.perf_counter()
    try:
        policy.reset(episode_context(adapter, spec))
    except POLICY_FAULTS as exc:
        result = EpisodeResult.failed(policy_blame(exc), f"reset: {describe_exception(exc)}")
    else:
        kind, message, terminal, termination = loop.run()
        try:
            policy.end_episode(spec.episode_id)
        except POLICY_FAULTS as exc:
            if kind is None:
                kind, message = policy_blame(exc), f"end_episode: {describe_exception(exc)}"
                termination = "error"
        result = EpisodeResult(terminal is not None, terminal, stepper.steps,
                               time.perf_counter() - start, kind, message,
                               policy_calls=loop.policy_calls, observations=stepper.observations,
                               decisions=loop.decisions, rejections=loop.rejections,
                               termination=termination,
                               progress=_progress(terminal is not None, stepper))
    for observer in observers:
        observer.on_end(adapter, spec, result)
    return result


def _progress(success: bool, stepper: "EpisodeStepper") -> float | None:
    """The episode's progress: 1 for a success, else the best its steps reported; None
    where the adapter declares no progress measure."""
    if success and stepper.adapter.progress_measure is not None:
        return 1.0
    return stepper.best_progress


POLICY_FAULTS = (Exception, SystemExit)
"""What a call into the policy may raise and the episode records as its failure (a
policy's ``sys.exit`` among them; an interrupt from the user still stops the run)."""


class EpisodeStepper:
    """The environment side of one episode: reset, read observations, apply actions, and
    tell the observers. The one place an adapter is stepped (:meth:`apply`); the policy
    side is :func:`run_episode`'s loop, or a gymnasium user's own
    (:class:`workbench.runtime.gym_env.CanonicalEnv`). Its methods raise what the
    adapter raises; the caller decides whom to blame."""

    def __init__(self, adapter: BenchmarkAdapter, spec: EpisodeSpec,
                 observers: Sequence[EpisodeObserver] = ()) -> None:
        self.adapter, self.spec, self.observers = adapter, spec, tuple(observers)
        self.steps = 0
        self.observations = 0
        self.best_progress: float | None = None

    def reset(self) -> None:
        start = time.perf_counter()
        self.adapter.reset(self.spec)
        self.steps = 0
        self.notify("on_reset", self.adapter, self.spec, time.perf_counter() - start)

    def read(self, features: Sequence[str]) -> dict[str, Any]:
        """The features, checked against the benchmark's protocol (cameras rendered first,
        timed apart), tagged with ``episode_id`` and ``step``."""
        cameras = [f for f in features if f.startswith(CAMERA_PREFIX)]
        others = [f for f in features if not f.startswith(CAMERA_PREFIX)]
        start = time.perf_counter()
        obs = self.adapter.observe(cameras) if cameras else {}
        rendered = time.perf_counter()
        if others:
            obs.update(self.adapter.observe(others))
        read = time.perf_counter()
        validate_observation(self.adapter.protocol, obs, tuple(features))
        self.observations += 1
        self.notify("on_observe", self.adapter, self.steps, obs,
                    rendered - start if cameras else 0.0, read - rendered)
        return obs | {"episode_id": self.spec.episode_id, "step": self.steps}

    def apply(self, action: np.ndarray) -> StepResult:
        """Apply one validated ``(dim,)`` action."""
        step = self.steps
        self.notify("before_step", self.adapter, step, action)
        start = time.perf_counter()
        result = self.adapter.step(action)
        self.steps += 1
        progress = self.adapter.step_progress(result)
        if progress is not None and (self.best_progress is None or progress > self.best_progress):
            self.best_progress = float(progress)
        self.notify("after_step", self.adapter, step, action, result,
                    time.perf_counter() - start)
        return result

    def notify(self, hook: str, *args: Any) -> None:
        for observer in self.observers:
            getattr(observer, hook)(*args)


_Outcome = tuple[ErrorKind | None, str | None, int | None, str]
"""(error kind, message, terminal step, termination) of an episode's loop."""


@dataclass
class _Loop:
    stepper: EpisodeStepper
    policy: Any
    observe_every_step: bool
    limit: int
    feedback: bool = False
    max_policy_calls: int | None = None
    policy_calls: int = 0
    decisions: int = 0
    rejections: int = 0

    def run(self) -> _Outcome:
        caps, stepper = self.policy.capabilities, self.stepper
        try:
            stepper.reset()
        except Exception as exc:
            return ErrorKind.INFRASTRUCTURE, f"reset: {describe_exception(exc)}", None, "error"
        queue: list[np.ndarray] = []
        obs: dict[str, Any] = {}
        message: str | None = None  # a refusal to hand to the next call
        fresh = False  # whether the current chunk has executed a control yet
        while stepper.steps < self.limit:
            step = stepper.steps
            if message is None and (self.observe_every_step or not queue):
                try:
                    obs = stepper.read(caps.features)
                except Exception as exc:  # the simulator or renderer failed, not the policy
                    return (ErrorKind.INFRASTRUCTURE,
                            f"step {step}: observation: {describe_exception(exc)}", None, "error")
            if not queue:
                if self.max_policy_calls is not None and \
                        self.policy_calls >= self.max_policy_calls:
                    return None, None, None, "call_budget"
                given = obs if message is None else obs | {"feedback": message}
                message = None
                try:
                    queue = self._act(given, step, caps.chunk_size)
                except _Stopped:
                    return None, None, None, "policy_stop"
                except InfrastructureError as exc:
                    if policy_blame(exc) is ErrorKind.INFRASTRUCTURE:
                        return (ErrorKind.INFRASTRUCTURE, f"step {step}: {exception_text(exc)}",
                                None, "error")
                    return (ErrorKind.POLICY, f"step {step}: policy raised "
                            f"{describe_exception(exc)}", None, "error")
                except ContractError as exc:
                    if not self.feedback:
                        return ErrorKind.POLICY, f"step {step}: {exception_text(exc)}", None, \
                            "error"
                    message = self._reject(step, exc)
                    continue
                except POLICY_FAULTS as exc:
                    return (ErrorKind.POLICY, f"step {step}: policy raised "
                            f"{describe_exception(exc)}", None, "error")
                fresh = True
            try:
                result = stepper.apply(queue[0])
            except ActionRejected as exc:
                if not self.feedback:
                    return ErrorKind.POLICY, f"step {step}: {exc}", None, "error"
                queue, message = [], self._reject(step, exc)
                continue
            except Exception as exc:
                return (ErrorKind.INFRASTRUCTURE,
                        f"step {step}: simulator raised {describe_exception(exc)}", None, "error")
            queue.pop(0)
            if fresh:
                self.decisions, fresh = self.decisions + 1, False
            if result.success:
                return None, None, step + 1, "success"
            if result.done:
                return None, None, None, ("step_limit" if stepper.steps >= self.limit
                                          else "native_end")
        return None, None, None, "step_limit"

    def _act(self, obs: dict[str, Any], step: int, chunk_size: int) -> list[np.ndarray]:
        start = time.perf_counter()
        self.policy_calls += 1
        proposed = self.policy.act(obs)
        if isinstance(proposed, Stop):
            self.stepper.notify("on_stop", step, obs, proposed.reason)
            raise _Stopped
        try:
            chunk = validate_action(self.stepper.adapter.protocol, proposed)[:chunk_size]
        except ContractError:
            self.stepper.notify("on_act", step, obs, proposed, time.perf_counter() - start)
            raise
        self.stepper.notify("on_act", step, obs, chunk, time.perf_counter() - start)
        return list(chunk)

    def _reject(self, step: int, exc: ContractError) -> str:
        """Count a refused action; its bounded message goes to the next call."""
        self.rejections += 1
        message = str(exc)[:REJECTION_CHARS]
        self.stepper.notify("on_reject", step, message)
        return message


class _Stopped(Exception):
    """The policy returned a Stop."""


REJECTION_CHARS = 300
"""Longest validation message handed back to a policy."""


# -- recorders -----------------------------------------------------------------------------
@dataclass
class RolloutRecorder(EpisodeObserver):
    """Collects what the rollout file holds: actions, trajectory states, success, reward."""

    actions: list[np.ndarray] = field(default_factory=list)
    states: list[np.ndarray] = field(default_factory=list)
    success: list[bool] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)

    def before_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray) -> None:
        self.states.append(adapter.trajectory_state())

    def after_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray,
                   result: StepResult, seconds: float) -> None:
        self.actions.append(action)
        self.success.append(result.success)
        self.reward.append(result.reward)

    def on_end(self, adapter: BenchmarkAdapter, spec: EpisodeSpec,
               result: EpisodeResult) -> None:
        if self.actions and len(self.states) == len(self.actions):
            self.states.append(adapter.trajectory_state())

    def rollout(self) -> Rollout | None:
        """The episode as a :class:`~workbench.records.rollout.Rollout` (None if no step)."""
        if not self.actions:
            return None
        return Rollout(np.asarray(self.actions, np.float32), np.asarray(self.states, np.float32),
                       np.asarray(self.success, bool), np.asarray(self.reward, np.float32))


@dataclass
class VideoRecorder(EpisodeObserver):
    """Keeps one camera's frame before every step, reusing the policy's observation
    when it read that camera at that step (no second render)."""

    feature: str
    frames: list[np.ndarray] = field(default_factory=list)
    _seen: tuple[int, np.ndarray] | None = None

    def on_observe(self, adapter: BenchmarkAdapter, step: int, observation: dict[str, Any],
                   render_s: float, read_s: float) -> None:
        frame = observation.get(self.feature)
        self._seen = None if frame is None else (step, frame)

    def before_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray) -> None:
        if self._seen is not None and self._seen[0] == step:
            self.frames.append(self._seen[1])
        else:
            self.frames.append(adapter.render(self.feature))


def video_feature(adapter: BenchmarkAdapter) -> str:
    """The camera a video shows: the protocol's first camera feature."""
    return next(f.name for f in adapter.protocol.features if f.name.startswith(CAMERA_PREFIX))


@dataclass
class InteractionRecorder(EpisodeObserver):
    """The episode's interaction history, grouped by policy call: what the policy was
    handed (feature names, dtypes and shapes, never pixels), what it proposed or that
    it stopped, the controls executed from it, refusals, and how the episode ended
    (schema ``workbench.interactions/v1``; :mod:`workbench.reports.interaction_history`
    renders it)."""

    protocol: Any
    calls: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def on_act(self, step: int, observation: dict[str, Any], actions: Any,
               seconds: float) -> None:
        self._call(step, observation, _proposal(actions))

    def on_stop(self, step: int, observation: dict[str, Any], reason: str) -> None:
        self._call(step, observation, {"kind": "stop", "reason": reason})

    def on_reject(self, step: int, message: str) -> None:
        if self.calls:
            self.calls[-1]["rejection"] = message

    def after_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray,
                   result: StepResult, seconds: float) -> None:
        if self.calls:
            self.calls[-1]["controls"].append({"step": step, "action": _numbers(action)})

    def on_end(self, adapter: BenchmarkAdapter, spec: EpisodeSpec,
               result: EpisodeResult) -> None:
        action = self.protocol.action
        low, high = action.bounds()
        self.data = {
            "schema": "workbench.interactions/v1", "episode_id": spec.episode_id,
            "task": spec.task, "instruction": adapter.instruction(spec.task),
            "action": {"dim": action.dim, "dtype": action.dtype, "meaning": action.meaning,
                       "low": _numbers(low), "high": _numbers(high)},
            "calls": self.calls,
            "termination": {
                "reason": result.termination, "success": bool(result.success),
                "terminal_step": result.terminal_step, "steps": result.steps,
                "error": None if result.error_kind is None else
                {"kind": result.error_kind.value, "message": result.error_message}},
            "counters": {"policy_calls": result.policy_calls, "decisions": result.decisions,
                         "controls": result.steps, "rejections": result.rejections},
        }

    def _call(self, step: int, observation: dict[str, Any], output: dict[str, Any]) -> None:
        features = {name: ({"dtype": "str", "shape": []} if isinstance(value, str) else
                           {"dtype": str(np.asarray(value).dtype),
                            "shape": list(np.shape(value))})
                    for name, value in observation.items()
                    if name not in ("episode_id", "step", "feedback")}
        self.calls.append({"call": len(self.calls), "step": step,
                           "observation": {"features": features, "pixels_included": False},
                           "feedback": observation.get("feedback"), "output": output,
                           "controls": [], "rejection": None})


def _numbers(values: Any) -> Any:
    """Plain JSON numbers (non-finite values as strings).

    >>> _numbers(np.float32([[0.5, -1.0]])), _numbers([1.0, float("nan"), -np.inf])
    ([[0.5, -1.0]], [1.0, 'nan', '-inf'])
    """
    array = np.asarray(values, dtype=np.float64)
    if np.isfinite(array).all():  # the usual case, at every step: no per-element check
        return array.tolist()
    flat = [float(v) if np.isfinite(v) else str(v) for v in array.ravel()]
    return np.asarray(flat, dtype=object).reshape(array.shape).tolist()


def _proposal(actions: Any) -> dict[str, Any]:
    if isinstance(actions, np.ndarray) and actions.dtype.kind in "biuf" and actions.ndim in (1, 2):
        return {"kind": "chunk", "chunk": _numbers(np.atleast_2d(actions))}
    return {"kind": "error", "message": f"proposed a {type(actions).__name__}"
            + (f" of shape {actions.shape} and dtype {actions.dtype}"
               if isinstance(actions, np.ndarray) else "") + ", not an action chunk"}


@dataclass(frozen=True)
class EpisodeOptions:
    """How a runtime runs and records one episode.

    out_dir None records no files; video records an MP4 of this episode;
    interactions writes its interaction history (JSON); feedback and
    max_policy_calls: see :func:`run_episode`; call_timeout_s: each policy call's time
    budget where the runtime bounds it (a pool worker's wait for its replica).
    """

    observe_every_step: bool
    run_id: str
    out_dir: str | None = None
    video: bool = False
    max_steps: int | None = None
    interactions: bool = False
    feedback: bool = False
    max_policy_calls: int | None = None
    call_timeout_s: float | None = None


def run_recorded_episode(adapter: BenchmarkAdapter, policy: Any, spec: EpisodeSpec,
                         options: EpisodeOptions,
                         observers: Sequence[EpisodeObserver] = ()) -> EpisodeResult:
    """:func:`run_episode` with its rollout file (video, interaction history) written
    under ``out_dir``; the result carries their paths. A failure to write them is an
    infrastructure error."""
    recording = options.out_dir is not None
    rollout = RolloutRecorder() if recording else None
    video = VideoRecorder(video_feature(adapter)) if options.video else None
    history = InteractionRecorder(adapter.protocol) if recording and options.interactions \
        else None
    recorders = [r for r in (rollout, video, history) if r is not None]
    result = run_episode(adapter, policy, spec, options.observe_every_step,
                         [*recorders, *observers], options.max_steps, options.feedback,
                         options.max_policy_calls)
    if not recording:
        return result
    stem = f"{options.out_dir}/%s/{episode_filename(spec.episode_id, options.run_id)}"
    try:
        record = rollout.rollout() if rollout is not None else None
        rollout_path = save_rollout(record, stem % "rollouts" + ".npz") if record else None
        clip = write_video(stem % "videos" + ".mp4", video.frames) \
            if video is not None and video.frames else None
        interactions = _write_json(stem % "interactions" + ".json",
                                   {**history.data, "run_id": options.run_id}) \
            if history is not None else None
    except Exception as exc:
        if result.error_kind is not None:
            return result
        return replace(result, error_kind=ErrorKind.INFRASTRUCTURE, termination="error",
                       error_message=f"writing episode files: {describe_exception(exc)}")
    return replace(result, video_path=clip, rollout_path=rollout_path,
                   interactions_path=interactions)


def _write_json(path: str, data: dict[str, Any]) -> str:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(target)
    return str(target)
