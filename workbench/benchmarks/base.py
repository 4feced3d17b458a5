"""What every benchmark adapter provides around the benchmark's own environment.

An adapter keeps the benchmark's environment, reset rules and scoring unchanged; it
only translates observations into canonical features and checks actions against the
protocol. ``observe(features)`` renders only what is asked for, so a runtime that
knows when a policy reads cameras pays for rendering only then.

An adapter class is built as ``Adapter(suite, seed=..., image_size=..., **options)``
and answers, before any environment exists, which suites and tasks it has
(:meth:`BenchmarkAdapter.list_suites`, :meth:`BenchmarkAdapter.suite_tasks`), the
protocol it speaks and the modules a fork server should import ahead of time
(``preload``). Only the runtime's episode loop
(:func:`workbench.runtime.episode.run_episode`) calls :meth:`BenchmarkAdapter.step`.
"""

from __future__ import annotations

import abc
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from workbench.contracts.capabilities import Capabilities
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import ContractError, Protocol


def cache_dir() -> Path:
    """Where adapters keep what they build once (``$WORKBENCH_CACHE``, default
    ``~/.cache/robo-workbench``)."""
    path = Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "robo-workbench"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class StepResult:
    """Outcome of one environment step. ``done`` is success or truncation."""

    reward: float
    success: bool
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


class SuiteTable:
    """``list_suites`` and ``suite_tasks`` from a table: mix it in before
    :class:`BenchmarkAdapter` and set ``suites`` (suite -> its tasks) and ``suite_label``
    (the family's name in the refusal of an unknown suite)."""

    suites: ClassVar[Mapping[str, Sequence[str]]]
    suite_label: ClassVar[str]

    @classmethod
    def list_suites(cls) -> list[str]:
        return list(cls.suites)

    @classmethod
    def suite_tasks(cls, suite: str) -> list[str]:
        """
        >>> class Table(SuiteTable):
        ...     suites, suite_label = {"sim": ("cube", "peg")}, "ALOHA"
        >>> Table.list_suites(), Table.suite_tasks("sim")
        (['sim'], ['cube', 'peg'])
        >>> Table.suite_tasks("real")
        Traceback (most recent call last):
        ValueError: unknown ALOHA suite 'real'; available: ['sim']
        """
        if suite not in cls.suites:
            raise ValueError(f"unknown {cls.suite_label} suite {suite!r}; available: "
                             f"{list(cls.suites)}")
        return list(cls.suites[suite])


class CachedEnvAdapter:
    """Environments built once per task and kept for the adapter's life, with the
    renderers beside them: mix it in before :class:`BenchmarkAdapter`, call
    ``_init_envs()`` in ``__init__`` and define ``_build(task)`` (and ``_release(env)``
    where closing an environment is not ``env.close()``). ``_environment(task)`` builds
    on first use; ``close()`` closes every renderer (``_renderers`` values, or tuples
    whose first item is one) and releases every environment, and forgets them."""

    _envs: dict[str, Any]
    _renderers: dict[str, Any]
    _env: Any = None

    def _init_envs(self) -> None:
        self._envs, self._renderers, self._env = {}, {}, None

    def _environment(self, task: str) -> Any:
        if task not in self._envs:
            self._envs[task] = self._build(task)
        return self._envs[task]

    def _build(self, task: str) -> Any:
        raise NotImplementedError(f"{type(self).__name__} builds no environment")

    def _release(self, env: Any) -> None:
        env.close()

    def close(self) -> None:
        for renderer in self._renderers.values():
            (renderer[0] if isinstance(renderer, tuple) else renderer).close()
        for env in self._envs.values():
            self._release(env)
        self._renderers.clear()
        self._envs.clear()
        self._env = None


class BenchmarkAdapter(abc.ABC):
    """One benchmark family behind a common interface."""

    name: str
    protocol: Protocol
    max_steps: int
    suite: str
    preload: tuple[str, ...] = ()
    """Modules worth importing once in a fork server before workers start."""
    initial_states: int | None = None
    """How many initial states each task has (episode ``i`` starts from state ``i``), so a
    config asking for more episodes is refused before anything runs; None: any number
    (initial states drawn from the episode's seed)."""
    reuse_option: str | None = None
    """The constructor option (a bool) that keeps environments between episodes (True)
    or rebuilds them per episode as official scripts that construct an environment per
    episode do (False); None when the adapter has no such choice."""

    @classmethod
    @abc.abstractmethod
    def list_suites(cls) -> list[str]:
        """Suite names this adapter knows."""

    @classmethod
    @abc.abstractmethod
    def suite_tasks(cls, suite: str) -> list[str]:
        """Task names of ``suite``; raises ValueError naming the known suites."""

    @classmethod
    def readiness(cls) -> str:
        """``"ready"``, or what is missing here (a package, assets, a device), checked
        without importing the simulator."""
        import importlib.util

        missing = [m for m in cls.preload if not m.startswith("workbench")
                   and importlib.util.find_spec(m.split(".")[0]) is None]
        return "ready" if not missing else "missing package " + ", ".join(missing)

    def tasks(self) -> list[str]:
        """Task names of the adapter's own suite."""
        return self.suite_tasks(self.suite)

    @abc.abstractmethod
    def instruction(self, task: str) -> str:
        """The natural-language instruction for a task."""

    @abc.abstractmethod
    def reset(self, episode: EpisodeSpec) -> None:
        """Put the environment in the episode's initial state."""

    @abc.abstractmethod
    def step(self, action: np.ndarray) -> StepResult:
        """Apply one validated ``(dim,)`` action."""

    @abc.abstractmethod
    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        """The current observation, holding exactly the requested canonical features."""

    @abc.abstractmethod
    def trajectory_state(self) -> np.ndarray:
        """A small float32 vector recorded every step for rollout analysis."""

    progress_measure: str | None = None
    """What :meth:`step_progress` measures, in words, when the adapter declares a progress
    measure (None: it declares none; an episode's progress is then not recorded)."""

    def step_progress(self, result: StepResult) -> float | None:
        """How far toward success the state after the step ``result`` reports is, in
        [0, 1); None when the adapter declares no progress measure. An episode's progress
        is 1 for a success, else the best over its steps (so it is monotone in success)."""
        return None

    def render(self, feature: str) -> np.ndarray:
        """One camera feature, rendered now (for videos)."""
        return self.observe([feature])[feature]

    def mujoco_data(self) -> Any:
        """The current environment's MuJoCo ``MjData`` (for profilers), or None when the
        simulator is not MuJoCo or no episode has started."""
        return None

    def close(self) -> None:
        """Release simulators and renderers."""


def check_compatibility(protocol: Protocol, caps: Capabilities) -> None:
    """Refuse a policy whose declared features or action protocol the benchmark lacks.

    Called before any episode starts.
    """
    if caps.action_protocol != protocol.name:
        raise ContractError(
            f"policy emits actions for protocol {caps.action_protocol!r}, "
            f"but the benchmark speaks {protocol.name!r} "
            f"({protocol.action.dim}-D {protocol.action.dtype}: {protocol.action.meaning})")
    available = set(protocol.feature_names)
    if caps.privileged:
        available |= set(protocol.privileged_names)
    missing = [f for f in caps.features if f not in available]
    if missing:
        hint = ""
        if set(missing) & set(protocol.privileged_names):
            hint = " (privileged features need a policy that declares privileged=True)"
        raise ContractError(
            f"{protocol.name}: policy reads features {missing} the benchmark does not serve"
            f"{hint}; available: {sorted(available)}")
