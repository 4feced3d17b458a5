"""One episode, stepped in-process: the semantics every runtime must reproduce.

``observe_every_step=True`` is the official-like behaviour (an observation rendered
at every step whether the policy reads it or not); ``False`` renders only when the
policy is about to read (at action-chunk boundaries). Both give the policy the same
observations at the steps it reads, so outcomes are identical.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter
from workbench.benchmarks.protocols import ContractError, validate_action, validate_observation
from workbench.plan import EpisodeSpec
from workbench.policies.base import EpisodeContext, Policy
from workbench.records.media import write_rollout, write_video
from workbench.records.store import EpisodeResult


@dataclass
class Trace:
    """What one episode produced step by step (for rollout files and videos)."""

    actions: list[np.ndarray] = field(default_factory=list)
    states: list[np.ndarray] = field(default_factory=list)
    success: list[bool] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    frames: list[np.ndarray] = field(default_factory=list)
    observed_steps: list[int] = field(default_factory=list)


def warm_up(adapter: BenchmarkAdapter, plan: Sequence[EpisodeSpec],
            features: Sequence[str]) -> float:
    """Build the environments and renderers ``plan``'s tasks need; returns seconds."""
    start = time.perf_counter()
    for spec in {s.task: s for s in sorted(plan, reverse=True)}.values():
        adapter.reset(spec)
        adapter.observe(features)
    return time.perf_counter() - start


def episode_context(adapter: BenchmarkAdapter, spec: EpisodeSpec) -> EpisodeContext:
    return EpisodeContext(spec.episode_id, spec.task, adapter.instruction(spec.task), spec.seed)


def read_observation(adapter: BenchmarkAdapter, policy: Policy, spec: EpisodeSpec,
                     step: int) -> dict[str, Any]:
    """Render and validate the features the policy reads, tagged with episode id and step."""
    features = policy.capabilities.features
    obs = adapter.observe(features)
    validate_observation(adapter.protocol, obs, features)
    obs["episode_id"], obs["step"] = spec.episode_id, step
    return obs


class InfrastructureError(RuntimeError):
    """The harness failed (a replica or simulator process died), not the policy."""


def run_episode(adapter: BenchmarkAdapter, policy: Policy, spec: EpisodeSpec,
                observe_every_step: bool = True, video: bool = False) -> tuple[EpisodeResult, Trace]:
    """Run one episode to success, truncation or error; never raises for policy faults.

    ``policy`` is a loaded Policy or anything with the same ``capabilities``, ``reset``,
    ``act`` and ``end_episode`` (a runtime's proxy to a remote replica).
    """
    start, trace = time.perf_counter(), Trace()
    try:
        policy.reset(episode_context(adapter, spec))
    except Exception as exc:
        kind = "infrastructure" if isinstance(exc, InfrastructureError) else "policy"
        return EpisodeResult(False, None, 0, time.perf_counter() - start, kind,
                             f"reset: {_describe(exc)}"), trace
    kind, message, terminal = _step_loop(adapter, policy, spec, observe_every_step, video, trace)
    try:
        policy.end_episode(spec.episode_id)
    except Exception as exc:
        if kind is None:
            kind = "infrastructure" if isinstance(exc, InfrastructureError) else "policy"
            message = f"end_episode: {_describe(exc)}"
    if trace.actions and len(trace.states) == len(trace.actions):
        trace.states.append(adapter.trajectory_state())
    return EpisodeResult(terminal is not None, terminal, len(trace.actions),
                         time.perf_counter() - start, kind, message), trace


def _step_loop(adapter: BenchmarkAdapter, policy: Policy, spec: EpisodeSpec,
               observe_every_step: bool, video: bool,
               trace: Trace) -> tuple[str | None, str | None, int | None]:
    chunk_size = policy.capabilities.chunk_size
    try:
        adapter.reset(spec)
    except Exception as exc:  # the simulator failed, not the policy
        return "infrastructure", _describe(exc), None
    queue: list[np.ndarray] = []
    obs: dict[str, Any] | None = None
    for step in range(adapter.max_steps):
        read_now = observe_every_step or not queue
        try:
            if read_now:
                obs = read_observation(adapter, policy, spec, step)
            if not queue:
                trace.observed_steps.append(step)
                queue = list(validate_action(adapter.protocol, policy.act(obs))[:chunk_size])
        except ContractError as exc:
            return "policy", f"step {step}: {exc}", None
        except InfrastructureError as exc:
            return "infrastructure", f"step {step}: {exc}", None
        except Exception as exc:
            return "policy", f"step {step}: policy raised {_describe(exc)}", None
        action = queue.pop(0)
        if video:
            trace.frames.append(obs["images.primary"] if read_now and "images.primary" in obs
                                else adapter.render("images.primary"))
        trace.states.append(adapter.trajectory_state())
        try:
            result = adapter.step(action)
        except Exception as exc:
            return "infrastructure", f"step {step}: simulator raised {_describe(exc)}", None
        trace.actions.append(action)
        trace.success.append(result.success)
        trace.reward.append(result.reward)
        if result.success:
            return None, None, step + 1
        if result.done:
            break
    return None, None, None


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


def save_episode_media(trace: Trace, stem: str, out_dir: str | None,
                       video: bool) -> tuple[str | None, str | None]:
    """Write the rollout ``.npz`` (and the MP4 when ``video``); returns their paths."""
    if out_dir is None:
        return None, None
    rollout = None
    if trace.actions:
        rollout = write_rollout(f"{out_dir}/rollouts/{stem}.npz", trace.actions, trace.states,
                                trace.success, trace.reward)
    clip = write_video(f"{out_dir}/videos/{stem}.mp4", trace.frames) if video and trace.frames \
        else None
    return clip, rollout
