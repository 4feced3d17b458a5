"""Franka Kitchen adapter (``kitchen-v1``) around gymnasium-robotics' own
``FrankaKitchen-v1`` and its own subtask checks, scored the way CALVIN scores chains.

A task is a chain of subtasks (:data:`CHAINS`), built as
``gymnasium.make("FrankaKitchen-v1", tasks_to_complete=chain)`` with the environment's
other arguments at their defaults: a subtask counts as done when the environment says
so (``info["step_task_completions"]``: its joints within 0.3 of their goal). As in
CALVIN, what counts is how many subtasks of the chain were completed *in a row*, in
the chain's order (:func:`chain_length`); the episode's ``success`` is the whole chain.
An episode ends at success, when the environment terminates (every subtask done, in
some order) or after ``step_limit`` (default 280, the registered limit) controls at
12.5 Hz.

Episodes: ``reset(seed=episode.seed)``. The kitchen always starts from the same joint
configuration; the seed draws the environment's own observation noise, which also
enters its controller (it integrates velocities from the noisy joint reading), so the
same episode runs the same wherever it runs.

Where the chain count goes: ``StepResult.info["chain_length"]`` after every step, and
the last column of :meth:`KitchenAdapter.trajectory_state` (end-effector xyz,
gripper aperture, chain length), which the runtime writes into every episode's rollout
file. The records' columns cannot hold it yet: :func:`recorded_chain_length` reads it
back from a rollout file (the ``rollout_path`` column), and CALVIN's average length is
the mean over episodes.

Canonical features: ``images.primary`` (the environment's own default view: a free
camera at distance 2.2, azimuth 70, elevation -35 looking at (-0.2, 0.5, 2.0), upright,
at the model's default render quality), rendered only when asked for; ``state`` (18-D:
the observation's first 18 entries, joint positions of the 7 arm joints and 2 fingers,
then their velocities, with the environment's noise); ``instruction`` (the chain as
text); privileged ``privileged.state`` (the full 59-D observation: robot 18, kitchen
object joint positions 21 and velocities 20).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, CachedEnvAdapter, StepResult, SuiteTable
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import get_protocol

SUBTASKS = {
    "microwave": "open the microwave door",
    "kettle": "move the kettle to the top left burner",
    "bottom burner": "turn the knob of the bottom burner",
    "top burner": "turn the knob of the top burner",
    "light switch": "turn on the light switch",
    "slide cabinet": "open the slide cabinet",
    "hinge cabinet": "open the left hinge cabinet",
}
"""The environment's seven subtasks (its ``tasks_to_complete`` names) and their text."""

CHAINS: dict[str, tuple[str, ...]] = {
    # D4RL kitchen-complete and kitchen-partial
    "microwave-kettle-light-slide": ("microwave", "kettle", "light switch", "slide cabinet"),
    # D4RL kitchen-mixed
    "microwave-kettle-burner-light": ("microwave", "kettle", "bottom burner", "light switch"),
    # consecutive pairs of those chains, and one along the upper cabinets
    "microwave-kettle": ("microwave", "kettle"),
    "kettle-burner": ("kettle", "bottom burner"),
    "light-slide": ("light switch", "slide cabinet"),
    "slide-hinge": ("slide cabinet", "hinge cabinet"),
    # every subtask alone
    **{name.replace(" ", "-"): (name,) for name in SUBTASKS},
}
"""Task name -> its subtasks, in the order they must be completed."""

SUITES = {
    "d4rl": ["microwave-kettle-light-slide", "microwave-kettle-burner-light"],
    "pairs": ["microwave-kettle", "kettle-burner", "light-slide", "slide-hinge"],
    "single": [name.replace(" ", "-") for name in SUBTASKS],
}
ENV_ID = "FrankaKitchen-v1"
EEF_SITE = "end_effector"


def chain_length(chain: Sequence[str], completions: Iterable[Iterable[str]]) -> int:
    """How many subtasks of ``chain`` were completed in a row, in order (CALVIN's count).

    completions: per step, the subtasks completed at that step (the environment's
    ``info["step_task_completions"]``); steps without one may be left out. Subtasks
    completed at the same step count in either order; one completed before its
    predecessor in the chain ends the count there.

    >>> chain = ("microwave", "kettle", "light switch")
    >>> chain_length(chain, [["microwave"], [], ["kettle"]])
    2
    >>> chain_length(chain, [["kettle"], ["microwave"], ["light switch"]])
    1
    >>> chain_length(chain, [["kettle", "microwave"], ["light switch"]])
    3
    >>> chain_length(chain, [["light switch"]])
    0
    """
    first: dict[str, int] = {}
    for step, done in enumerate(completions):
        for name in done:
            first.setdefault(name, step)
    count, last = 0, -1
    for name in chain:
        step = first.get(name)
        if step is None or step < last:
            break
        count, last = count + 1, step
    return count


def chain_instruction(chain: Sequence[str]) -> str:
    """The chain as one instruction.

    >>> chain_instruction(("light switch", "slide cabinet"))
    'turn on the light switch, then open the slide cabinet'
    """
    return ", then ".join(SUBTASKS[name] for name in chain)


def recorded_chain_length(rollout_path: str | os.PathLike) -> int:
    """The chain length an episode reached, read from its rollout file (the last column
    of its final trajectory state; see :meth:`KitchenAdapter.trajectory_state`)."""
    with np.load(rollout_path, allow_pickle=False) as data:
        return int(round(float(data["state"][-1, -1])))


class KitchenAdapter(SuiteTable, CachedEnvAdapter, BenchmarkAdapter):
    """Runs Franka Kitchen chains; keeps one environment (and renderer) per chain."""

    name = "kitchen"
    suites = SUITES
    suite_label = "kitchen"
    max_steps = 280
    protocol = get_protocol("kitchen-v1")
    preload = ("mujoco", "gymnasium_robotics", "workbench.benchmarks.kitchen")

    def __init__(self, suite: str = "d4rl", seed: int = 0, image_size: int = 224,
                 step_limit: int | None = None) -> None:
        """seed: unused (an episode's seed comes from its identity alone), kept for the
        common constructor."""
        self._tasks = self.suite_tasks(suite)
        self.suite, self.seed, self.image_size = suite, seed, image_size
        self.max_steps = step_limit or type(self).max_steps
        self._init_envs()
        self._task: str | None = None
        self._obs: np.ndarray | None = None
        self._completed: list[list[str]] = []
        self._steps = 0

    def instruction(self, task: str) -> str:
        return chain_instruction(CHAINS[task])

    @property
    def completed_in_a_row(self) -> int:
        """Subtasks of the current chain completed in a row so far (:func:`chain_length`)."""
        return chain_length(CHAINS[self._task], self._completed) if self._task else 0

    def reset(self, episode: EpisodeSpec) -> None:
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}; "
                             f"available: {self._tasks}")
        env = self._environment(episode.task)
        obs, _ = env.reset(seed=episode.seed)
        self._obs = np.asarray(obs["observation"], np.float64)
        self._env, self._task, self._steps, self._completed = env, episode.task, 0, []

    def step(self, action: np.ndarray) -> StepResult:
        if self._env is None:
            raise RuntimeError("KitchenAdapter.step() before reset()")
        obs, reward, terminated, truncated, info = self._env.step(
            np.asarray(action, np.float64))
        self._obs = np.asarray(obs["observation"], np.float64)
        self._steps += 1
        done_now = sorted(info["step_task_completions"])
        if done_now:
            self._completed.append(done_now)
        count = self.completed_in_a_row
        success = count == len(CHAINS[self._task])
        info = {"step_task_completions": done_now,
                "episode_task_completions": list(info["episode_task_completions"]),
                "tasks_to_complete": sorted(info["tasks_to_complete"]), "chain_length": count}
        done = success or terminated or truncated or self._steps >= self.max_steps
        return StepResult(float(reward), success, done, info)

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._obs is None:
            raise RuntimeError("KitchenAdapter.observe() before reset()")
        out: dict[str, Any] = {}
        for name in features:
            if name == "images.primary":
                out[name] = self.render(name)
            elif name == "state":
                out[name] = self._obs[:18].astype(np.float32)
            elif name == "privileged.state":
                out[name] = self._obs.astype(np.float32)
            elif name == "instruction":
                out[name] = self.instruction(self._task)
            else:
                self.protocol.feature(name)  # raises naming the declared features
        return out

    def render(self, feature: str = "images.primary") -> np.ndarray:
        """One (image_size, image_size, 3) uint8 frame of the environment's default view."""
        if feature != "images.primary":
            raise ValueError(f"{self.protocol.name} has one camera, 'images.primary'; "
                             f"got {feature!r}")
        renderer, camera = self._renderer(self._task)
        renderer.update_scene(self._env.unwrapped.data, camera=camera)
        return renderer.render()

    def trajectory_state(self) -> np.ndarray:
        """(5,) float32: end-effector xyz, gripper aperture (sum of the finger joints),
        subtasks of the chain completed in a row."""
        data = self._env.unwrapped.data
        eef = data.site(EEF_SITE).xpos
        return np.array([*eef, data.qpos[7] + data.qpos[8],
                         self.completed_in_a_row], np.float32)

    def mujoco_data(self) -> Any:
        return None if self._env is None else self._env.unwrapped.data

    def _build(self, task: str) -> Any:
        import gymnasium
        import gymnasium_robotics

        gymnasium.register_envs(gymnasium_robotics)
        # the passive checker only warns that observations share their goal dict,
        # which the adapter never keeps
        return gymnasium.make(
            ENV_ID, tasks_to_complete=list(CHAINS[task]),
            max_episode_steps=self.max_steps, disable_env_checker=True)

    def _renderer(self, task: str) -> tuple[Any, Any]:
        if task not in self._renderers:
            import mujoco
            from gymnasium_robotics.envs.franka_kitchen.franka_env import DEFAULT_CAMERA_CONFIG

            model = self._envs[task].unwrapped.model
            camera = mujoco.MjvCamera()
            mujoco.mjv_defaultFreeCamera(model, camera)
            camera.distance = DEFAULT_CAMERA_CONFIG["distance"]
            camera.azimuth = DEFAULT_CAMERA_CONFIG["azimuth"]
            camera.elevation = DEFAULT_CAMERA_CONFIG["elevation"]
            camera.lookat[:] = DEFAULT_CAMERA_CONFIG["lookat"]
            renderer = mujoco.Renderer(model, self.image_size, self.image_size)
            self._renderers[task] = (renderer, camera)
        return self._renderers[task]
