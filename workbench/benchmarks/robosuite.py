"""robosuite adapter (``robosuite-v1``) around robosuite's own manipulation tasks and
success checks, through its OSC pose controller: LIBERO's contract (7-D end-effector
delta in [-1, 1] plus a binarised gripper; agent-view and eye-in-hand cameras).

Suite ``single-arm``: Lift, Stack, PickPlaceCan, NutAssemblySquare, Door (Panda). An
episode's initial state is robosuite's own placement sampler drawn from a generator
seeded with the episode's seed (the environment's and its sampler's generators are
both reseeded before the reset), so the same episode starts the same wherever it
runs; success is the task's ``_check_success()``; an episode ends at the first success
or after ``step_limit`` (default 500) controls at 20 Hz.

Canonical features, as for LIBERO: ``images.primary`` (``agentview``) and
``images.wrist`` (``robot0_eye_in_hand``), upright, rendered only when asked for;
``state`` (16-D: end-effector position 3, quaternion 4, gripper joints 2, arm joints
7); ``state.eef8``; ``state.controller8``;
``instruction``; privileged ``privileged.state`` (the task's
object-state vector: the cube's pose in Lift, say).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, CachedEnvAdapter, StepResult, SuiteTable
from workbench.benchmarks.osc import controller8, eef8, state16
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import get_protocol

INSTRUCTIONS = {
    "Lift": "lift the red cube",
    "Stack": "stack the red cube on the green cube",
    "PickPlaceCan": "pick up the can and place it in its bin",
    "NutAssemblySquare": "fit the square nut onto the square peg",
    "Door": "open the door",
}
SUITES = {"single-arm": list(INSTRUCTIONS)}
CAMERAS = {"images.primary": "agentview", "images.wrist": "robot0_eye_in_hand"}




def seed_placements(env: Any, seed: int) -> None:
    """Give a robosuite environment and every placement sampler below it one fresh
    generator seeded with ``seed`` (robosuite draws initial object poses from them)."""
    rng = np.random.default_rng(seed)
    env.rng = rng
    stack = [getattr(env, "placement_initializer", None)]
    while stack:
        sampler = stack.pop()
        if sampler is None:
            continue
        sampler.rng = rng
        stack.extend(getattr(sampler, "samplers", {}).values())


class RobosuiteAdapter(SuiteTable, CachedEnvAdapter, BenchmarkAdapter):
    """Runs robosuite episodes; keeps one environment per task for its life."""

    name = "robosuite"
    suites = SUITES
    suite_label = "robosuite"
    max_steps = 500
    protocol = get_protocol("robosuite-v1")
    preload = ("robosuite", "workbench.benchmarks.robosuite")

    def __init__(self, suite: str = "single-arm", seed: int = 0, image_size: int = 128,
                 step_limit: int | None = None) -> None:
        self._tasks = self.suite_tasks(suite)
        self.suite, self.seed, self.image_size = suite, seed, image_size
        self.max_steps = step_limit or type(self).max_steps
        self._init_envs()
        self._task: str | None = None
        self._obs: dict[str, Any] | None = None
        self._steps = 0

    def instruction(self, task: str) -> str:
        return INSTRUCTIONS[task]

    def _build(self, task: str) -> Any:
        import robosuite
        from robosuite import load_composite_controller_config

        config = load_composite_controller_config(controller="BASIC", robot="Panda")
        return robosuite.make(
            task, robots="Panda", controller_configs=config, has_renderer=False,
            has_offscreen_renderer=True, use_camera_obs=False, control_freq=20,
            horizon=self.max_steps, ignore_done=True, seed=self.seed)

    def reset(self, episode: EpisodeSpec) -> None:
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}")
        env = self._environment(episode.task)
        seed_placements(env, episode.seed)
        self._obs = env.reset()
        self._env, self._task, self._steps = env, episode.task, 0

    def step(self, action: np.ndarray) -> StepResult:
        if self._env is None:
            raise RuntimeError("RobosuiteAdapter.step() before reset()")
        command = np.asarray(action, np.float64).copy()
        command[6] = 1.0 if command[6] > 0 else -1.0
        obs, reward, _, info = self._env.step(command)
        self._obs = obs
        self._steps += 1
        success = bool(self._env._check_success())
        return StepResult(float(reward), success, success or self._steps >= self.max_steps, info)

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._obs is None:
            raise RuntimeError("RobosuiteAdapter.observe() before reset()")
        out: dict[str, Any] = {}
        o = self._obs
        for name in features:
            if name in CAMERAS:
                out[name] = self.render(name)
            elif name == "state":
                out[name] = self.trajectory_state()
            elif name == "state.eef8":
                out[name] = eef8(o)
            elif name == "state.controller8":
                out[name] = controller8(self._env.robots[0], o)
            elif name == "privileged.state":
                out[name] = np.asarray(o["object-state"], np.float32)
            elif name == "instruction":
                out[name] = INSTRUCTIONS[self._task]
            else:
                self.protocol.feature(name)
        return out

    def render(self, feature: str = "images.primary") -> np.ndarray:
        frame = self._env.sim.render(width=self.image_size, height=self.image_size,
                                     camera_name=CAMERAS[feature])
        return np.ascontiguousarray(frame[::-1])

    def trajectory_state(self) -> np.ndarray:
        return state16(self._obs)

    def mujoco_data(self) -> Any:
        return None if self._env is None else self._env.sim.data._data
