"""ALOHA adapter (``robotwin2-v1``) around gym-aloha's own bimanual ViperX tasks and scoring.

Suite ``sim``: ``AlohaTransferCube-v0`` and ``AlohaInsertion-v0``, the simulated tasks
of ACT (Zhao et al. 2023) as gym-aloha packages them. The contract is RoboTwin 2's:
a 14-D absolute target, per arm (left, then right) six joint angles in radians and a
gripper opening normalised to [0, 1] (0 closed, 1 open), which is gym-aloha's own
action; ``state`` is gym-aloha's ``agent_pos`` in the same layout.

An episode starts as gym-aloha's ``reset(seed=episode.seed)`` does: its own object
sampler draws the cube (or the peg and socket) from ``RandomState(seed)``, so an
episode starts the same wherever it runs. Success is the task's maximum reward (4:
the cube held by the left gripper off the table; the peg touching the socket's pin),
as gym-aloha and ACT score it; an episode ends at the first success or after
``step_limit`` (default 400, ACT's and LeRobot's episode length) controls at 50 Hz.

Rendering only on demand: gym-aloha's ``step`` and ``reset`` go through dm_control's
``control.Environment``, whose observation renders three 480x640 cameras (``top``,
``angle``, ``front_close``) every step, of which gym-aloha keeps one. The adapter
drives the same dm_control physics and gym-aloha task objects the way
``control.Environment`` does (``before_step``, ``physics.step`` over the control
period, ``after_step``, ``get_reward``; ``initialize_episode`` in a reset context),
leaving out only that observation; cameras render through ``physics.render`` when a
policy reads them. gym-aloha's environments, reset, actuation and reward code run
unchanged.

Canonical features: ``images.head`` (gym-aloha's ``top`` camera), ``images.left_wrist``
and ``images.right_wrist`` (the model's wrist cameras, which gym-aloha does not
observe), each ``(image_size * 3 // 4, image_size)`` so that 640 gives gym-aloha's
480x640; ``state`` (14); ``instruction``; privileged ``privileged.state``
(gym-aloha's ``env_state``: each object's position and quaternion, 7 per object).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, CachedEnvAdapter, StepResult, SuiteTable
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import Feature, get_protocol

TASKS = {
    "AlohaTransferCube-v0": ("transfer_cube",
                             "pick up the cube with the right arm and transfer it to the "
                             "left arm"),
    "AlohaInsertion-v0": ("insertion", "insert the peg into the socket"),
}
SUITES = {"sim": list(TASKS)}
CAMERAS = {"images.head": "top", "images.left_wrist": "left_wrist",
           "images.right_wrist": "right_wrist"}

PROTOCOL = replace(
    get_protocol("robotwin2-v1"),
    privileged=(Feature("privileged.state", "float32", (None,),
                        "gym-aloha's env_state: position and quaternion (wxyz) of each "
                        "object, 7 per object (cube 7; peg then socket 14)"),))
"""RoboTwin 2's contract, plus the privileged object poses ALOHA's scripted
diagnostics read (a protocol's privileged features are the benchmark's own)."""


def _initial_objects(task: str, seed: int) -> np.ndarray:
    """The object poses gym-aloha's ``reset(seed=seed)`` puts in place, from its own
    samplers: ``(7,)`` for the cube, ``(14,)`` for the peg then the socket."""
    from gym_aloha.utils import sample_box_pose, sample_insertion_pose

    if task == "transfer_cube":
        return sample_box_pose(seed)
    return np.concatenate(sample_insertion_pose(seed))


class AlohaAdapter(SuiteTable, CachedEnvAdapter, BenchmarkAdapter):
    """Runs gym-aloha episodes; keeps one environment per task for its life."""

    name = "aloha"
    suites = SUITES
    suite_label = "ALOHA"
    max_steps = 400
    protocol = PROTOCOL
    preload = ("mujoco", "dm_control", "gym_aloha", "workbench.benchmarks.aloha")

    def __init__(self, suite: str = "sim", seed: int = 0, image_size: int = 640,
                 step_limit: int | None = None) -> None:
        """image_size: camera width in pixels (height is three quarters of it, ALOHA's
        aspect). seed is accepted for the common interface: an episode's start depends
        on its identity alone."""
        self._tasks = self.suite_tasks(suite)
        self.suite, self.seed, self.image_size = suite, seed, image_size
        self.max_steps = step_limit or type(self).max_steps
        self._init_envs()
        self._control: Any = None
        self._task: str | None = None
        self._steps = 0

    def instruction(self, task: str) -> str:
        return TASKS[task][1]

    def _build(self, task: str) -> Any:
        """gym-aloha's own environment for ``task`` (its dm_control physics and task)."""
        import gymnasium

        height, width = self.image_shape
        # "gym_aloha:" has gymnasium import gym_aloha, which registers its ids
        env = gymnasium.make(f"gym_aloha:gym_aloha/{task}", obs_type="pixels_agent_pos",
                             observation_height=height, observation_width=width).unwrapped
        visual = env._env.physics.model.vis.global_
        visual.offwidth, visual.offheight = (max(visual.offwidth, width),
                                             max(visual.offheight, height))
        return env

    @property
    def image_shape(self) -> tuple[int, int]:
        """(height, width) of every camera feature."""
        return self.image_size * 3 // 4, self.image_size

    def reset(self, episode: EpisodeSpec) -> None:
        """gym-aloha's ``reset(seed=episode.seed)``, without rendering its observation."""
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}; "
                             f"available: {self._tasks}")
        from gym_aloha.tasks.sim import BOX_POSE

        env = self._environment(episode.task)
        control = env._env
        control.task.random.seed(episode.seed)
        control.task._random = np.random.RandomState(episode.seed)
        BOX_POSE[0] = _initial_objects(env.task, episode.seed)  # read by initialize_episode
        with control.physics.reset_context():
            control.task.initialize_episode(control.physics)
        self._control, self._task, self._steps = control, episode.task, 0

    def step(self, action: np.ndarray) -> StepResult:
        """One control period (20 ms), as dm_control's ``Environment.step`` runs it."""
        if self._control is None:
            raise RuntimeError("AlohaAdapter.step() before reset()")
        task, physics = self._control.task, self._control.physics
        task.before_step(np.asarray(action, np.float64), physics)
        physics.step(round(self._control.control_timestep() / physics.timestep()))
        task.after_step(physics)
        reward = float(task.get_reward(physics))
        self._steps += 1
        success = reward == task.max_reward
        return StepResult(reward, success, success or self._steps >= self.max_steps,
                          {"is_success": success})

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._control is None:
            raise RuntimeError("AlohaAdapter.observe() before reset()")
        task, physics = self._control.task, self._control.physics
        out: dict[str, Any] = {}
        for name in features:
            if name in CAMERAS:
                out[name] = self.render(name)
            elif name == "state":
                out[name] = task.get_qpos(physics).astype(np.float32)
            elif name == "privileged.state":
                out[name] = task.get_env_state(physics).astype(np.float32)
            elif name == "instruction":
                out[name] = TASKS[self._task][1]
            else:
                self.protocol.feature(name)  # raises naming the declared features
        return out

    def render(self, feature: str = "images.head") -> np.ndarray:
        """One camera frame ``(H, W, 3)`` uint8, upright, rendered now."""
        height, width = self.image_shape
        return self._control.physics.render(height=height, width=width,
                                            camera_id=CAMERAS[feature])

    def trajectory_state(self) -> np.ndarray:
        """agent_pos (14) then the object poses (7 per object)."""
        task, physics = self._control.task, self._control.physics
        return np.concatenate([task.get_qpos(physics),
                               task.get_env_state(physics)]).astype(np.float32)

    def mujoco_data(self) -> Any:
        return None if self._control is None else self._control.physics.data.ptr

    def _release(self, env: Any) -> None:
        env._env.physics.free()

    def close(self) -> None:
        super().close()
        self._control = None
