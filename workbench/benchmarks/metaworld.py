"""MetaWorld adapter (``metaworld-v1``) around MetaWorld 3.x's own environments and scoring.

Suites: ``MT1:<task>``, ``MT10``, ``MT50``. Episode ``i`` of a task uses the ``i``-th
task object (object and goal placement) that ``MT10/MT50/MT1(seed=...)`` draws for it;
``env.set_task`` then ``reset()`` reproduces it exactly (``reset(seed=)`` is ignored by
MetaWorld). Success is ``info["success"]``; an episode ends at the first success or
after 500 steps, as MetaWorld's own evaluation does.

Canonical features: ``images.primary`` (``corner`` camera, flipped upright),
``images.wrist`` (``gripperPOV``), ``state`` (end-effector xyz and gripper aperture),
``instruction``; privileged ``privileged.state`` (the full 39-D observation).
Cameras are rendered at the model's default quality, only when asked for. MuJoCo is
imported when the first environment is built; whoever builds it chooses the rendering
backend first (:func:`workbench.contracts.rendering.use_headless_rendering`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from typing import Any, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, CachedEnvAdapter, StepResult, cache_dir
from workbench.benchmarks.metaworld_tasks import INSTRUCTIONS, MT10_TASKS, MT50_TASKS
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import get_protocol

CAMERAS = {"images.primary": ("corner", True), "images.wrist": ("gripperPOV", False)}
SUITES = ("MT10", "MT50")
NUM_INIT_STATES = 50  # task objects MetaWorld draws per environment


def list_suites() -> list[str]:
    """Suite names: MT10, MT50 and ``MT1:<task>`` for every task."""
    return list(SUITES) + [f"MT1:{t}" for t in sorted(INSTRUCTIONS)]


def suite_tasks(suite: str) -> list[str]:
    """Task names in a suite, refusing unknown suites with the list of known ones.

    >>> suite_tasks("MT1:reach-v3")
    ['reach-v3']
    >>> len(suite_tasks("MT50"))
    50
    """
    if suite.startswith("MT1:") and suite[4:] in INSTRUCTIONS:
        return [suite[4:]]
    if suite in SUITES:
        return list(MT10_TASKS if suite == "MT10" else MT50_TASKS)
    raise ValueError(f"unknown MetaWorld suite {suite!r}; available: MT10, MT50, "
                     f"MT1:<task> with task in {sorted(INSTRUCTIONS)}")


@functools.lru_cache(maxsize=8)
def task_set(suite: str, seed: int = 0) -> dict[str, list[Any]]:
    """MetaWorld task objects per task name, built once per process and cached on disk.

    Building MT10 takes about 8 s; the pickled task list loads in milliseconds, so
    workers and later runs reuse it.
    """
    path = cache_dir() / f"{suite.replace(':', '_')}-seed{seed}-{_metaworld_version()}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    import metaworld

    bench = (metaworld.MT1(suite[4:], seed=seed) if suite.startswith("MT1:")
             else getattr(metaworld, suite)(seed=seed))
    tasks: dict[str, list[Any]] = {name: [] for name in bench.train_classes}
    for t in bench.train_tasks:
        tasks[t.env_name].append(t)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with tmp.open("wb") as f:
        pickle.dump(tasks, f)
    tmp.replace(path)
    return tasks


def _metaworld_version() -> str:
    from importlib.metadata import version

    return hashlib.sha1(version("metaworld").encode()).hexdigest()[:8]


class MetaWorldAdapter(CachedEnvAdapter, BenchmarkAdapter):
    """Runs MetaWorld episodes; keeps one environment and renderer per task for its life."""

    name = "metaworld"
    max_steps = 500
    initial_states = 50  # each task's 50 train tasks of the task set
    protocol = get_protocol("metaworld-v1")
    preload = ("mujoco", "metaworld", "workbench.benchmarks.metaworld")
    reuse_option = "reuse_context"

    def __init__(self, suite: str = "MT10", seed: int = 0, image_size: int = 224,
                 reuse_context: bool = True) -> None:
        """reuse_context=False rebuilds the environment and renderer at every reset, as
        official evaluation scripts that construct an environment per episode do."""
        self._tasks = suite_tasks(suite)
        self.reuse_context = reuse_context
        self.suite = suite
        self.seed = seed
        self.image_size = image_size
        self._init_envs()
        self._task: str | None = None
        self._obs: np.ndarray | None = None
        self._steps = 0

    @classmethod
    def list_suites(cls) -> list[str]:
        return list_suites()

    @classmethod
    def suite_tasks(cls, suite: str) -> list[str]:
        return suite_tasks(suite)

    def tasks(self) -> list[str]:
        return list(self._tasks)

    def instruction(self, task: str) -> str:
        return INSTRUCTIONS[task]

    def reset(self, episode: EpisodeSpec) -> None:
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}; "
                             f"available: {self._tasks}")
        objects = task_set(self.suite, self.seed)[episode.task]
        if not 0 <= episode.init_state_id < len(objects):
            raise ValueError(f"init_state_id {episode.init_state_id} out of range "
                             f"[0, {len(objects)}) for {episode.task}")
        if not self.reuse_context:
            self.close()
        self._task = episode.task
        self._env = self._environment(episode.task)
        self._env.set_task(objects[episode.init_state_id])
        obs, _ = self._env.reset()
        self._obs = obs
        self._steps = 0

    def step(self, action: np.ndarray) -> StepResult:
        if self._env is None:
            raise RuntimeError("MetaWorldAdapter.step() before reset()")
        obs, reward, _, truncated, info = self._env.step(action)
        self._obs = obs
        self._steps += 1
        success = bool(info["success"])
        done = success or truncated or self._steps >= self.max_steps
        return StepResult(float(reward), success, done, info)

    progress_measure = ("MetaWorld's shaped reward (10 at the goal) over 10, capped below 1: "
                        "the best of the episode, 1 for a success")

    def step_progress(self, result: StepResult) -> float | None:
        return min(max(float(result.reward) / 10.0, 0.0), 0.999)

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._obs is None:
            raise RuntimeError("MetaWorldAdapter.observe() before reset()")
        out: dict[str, Any] = {}
        for name in features:
            if name in CAMERAS:
                out[name] = self.render(name)
            elif name == "state":
                out[name] = self._obs[:4].astype(np.float32)
            elif name == "privileged.state":
                out[name] = self._obs.astype(np.float32)
            elif name == "instruction":
                out[name] = INSTRUCTIONS[self._task]
            else:
                self.protocol.feature(name)  # raises naming the declared features
        return out

    def render(self, feature: str = "images.primary") -> np.ndarray:
        """One camera frame (H, W, 3) uint8 at the model's default render quality."""
        camera, flip = CAMERAS[feature]
        renderer = self._renderer(self._task)
        renderer.update_scene(self._env.data, camera=camera)
        frame = renderer.render()
        return np.ascontiguousarray(frame[::-1]) if flip else frame

    def trajectory_state(self) -> np.ndarray:
        return self._obs[:4].astype(np.float32)

    def mujoco_data(self) -> Any:
        return None if self._env is None else self._env.data

    def _build(self, task: str) -> Any:
        from metaworld import env_dict

        return env_dict.ALL_V3_ENVIRONMENTS[task]()

    def _renderer(self, task: str) -> Any:
        if task not in self._renderers:
            import mujoco

            model = self._envs[task].model
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.image_size)
            model.vis.global_.offheight = max(model.vis.global_.offheight, self.image_size)
            self._renderers[task] = mujoco.Renderer(model, self.image_size, self.image_size)
        return self._renderers[task]
