"""The Policy lifecycle: a model wrapped once, with declared capabilities.

States: Created -> (load) -> Loaded -> (reset) -> Episode active -> (end_episode) ->
Loaded -> (unload) -> Released. A replica may hold several active episodes at once
(one per simulator worker); the policy is "Episode active" while any is open.
A call out of order raises :class:`LifecycleError` naming the state.

Subclasses implement ``_load``, ``_act`` and optionally ``_reset``, ``_act_batch``,
``_end_episode`` and ``_unload``; the public methods enforce the state machine.

>>> from workbench.policies.zero import ZeroPolicy
>>> p = ZeroPolicy("metaworld-v1")
>>> p.act({"episode_id": "e0"})
Traceback (most recent call last):
...
workbench.policies.base.LifecycleError: ZeroPolicy.act() needs an active episode 'e0'; policy state is Created
"""

from __future__ import annotations

import enum
from typing import Any, Sequence

import numpy as np

from workbench.contracts.capabilities import (Capabilities, EpisodeContext, LoadContext,
                                              Observation, Stop)
from workbench.errors import PolicyError


class LifecycleError(PolicyError):
    """A Policy method called in a state that does not allow it."""


class State(enum.Enum):
    CREATED = "Created"
    LOADED = "Loaded"
    EPISODE_ACTIVE = "Episode active"
    RELEASED = "Released"


class Policy:
    """Base class enforcing the lifecycle; see the module docstring."""

    name: str = "policy"
    preload: tuple[str, ...] = ()
    """Modules worth importing once in a fork server before replicas start."""

    def __init__(self) -> None:
        self._state = State.CREATED
        self._episodes: dict[str, Any] = {}

    # -- declared capabilities --------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        raise NotImplementedError

    @property
    def state(self) -> State:
        return self._state

    def preflight(self) -> None:
        """Check local dependencies and credentials without a benchmark, a model request
        or an action; raise with a clear message when something is missing. Campaigns
        call it before claiming any case. The default checks nothing."""

    # -- lifecycle --------------------------------------------------------------
    def load(self, context: LoadContext) -> Capabilities:
        self._require({State.CREATED}, "load")
        self._load(context)
        self._state = State.LOADED
        return self.capabilities

    def reset(self, context: EpisodeContext) -> None:
        self._require({State.LOADED, State.EPISODE_ACTIVE}, "reset")
        if context.episode_id in self._episodes:
            raise LifecycleError(
                f"{type(self).__name__}.reset(): episode {context.episode_id!r} is already active")
        self._episodes[context.episode_id] = self._reset(context)
        self._state = State.EPISODE_ACTIVE

    def act(self, observation: Observation) -> np.ndarray | Stop:
        """One action ``(dim,)`` or a chunk ``(chunk_size, dim)`` for the observation's
        episode, or :class:`~workbench.contracts.capabilities.Stop` to end it. When the
        benchmark refused the previous chunk (feedback mode), ``observation["feedback"]``
        holds its public validation message and the observation is the last acknowledged."""
        self._require_episode(observation, "act")
        return self._act(observation, self._episodes[observation["episode_id"]])

    def act_batch(self, observations: Sequence[Observation]) -> list[np.ndarray]:
        """Actions for observations from several episodes, batched natively when declared."""
        for obs in observations:
            self._require_episode(obs, "act_batch")
        if self.capabilities.native_batching:
            return self._act_batch(observations, [self._episodes[o["episode_id"]]
                                                  for o in observations])
        return [self._act(o, self._episodes[o["episode_id"]]) for o in observations]

    def end_episode(self, episode_id: str) -> None:
        self._require({State.EPISODE_ACTIVE}, "end_episode")
        if episode_id not in self._episodes:
            raise LifecycleError(
                f"{type(self).__name__}.end_episode(): episode {episode_id!r} is not active")
        self._end_episode(episode_id, self._episodes.pop(episode_id))
        if not self._episodes:
            self._state = State.LOADED

    def unload(self) -> None:
        self._require({State.LOADED}, "unload")
        self._unload()
        self._state = State.RELEASED

    # -- for subclasses ---------------------------------------------------------
    def _load(self, context: LoadContext) -> None:
        pass

    def _reset(self, context: EpisodeContext) -> Any:
        return None

    def _act(self, observation: Observation, episode_state: Any) -> np.ndarray:
        raise NotImplementedError

    def _act_batch(self, observations: Sequence[Observation],
                   episode_states: Sequence[Any]) -> list[np.ndarray]:
        return [self._act(o, s) for o, s in zip(observations, episode_states)]

    def _end_episode(self, episode_id: str, episode_state: Any) -> None:
        pass

    def _unload(self) -> None:
        pass

    # -- checks -----------------------------------------------------------------
    def _require(self, allowed: set[State], method: str) -> None:
        if self._state not in allowed:
            names = " or ".join(sorted(s.value for s in allowed))
            raise LifecycleError(
                f"{type(self).__name__}.{method}() needs state {names}; "
                f"policy state is {self._state.value}")

    def _require_episode(self, observation: Observation, method: str) -> None:
        episode_id = observation.get("episode_id")
        if self._state is not State.EPISODE_ACTIVE or episode_id not in self._episodes:
            raise LifecycleError(
                f"{type(self).__name__}.{method}() needs an active episode {episode_id!r}; "
                f"policy state is {self._state.value}")
