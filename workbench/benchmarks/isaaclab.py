"""Isaac Lab adapter (``isaaclab-franka-ik-rel-v1``) around Isaac Lab's gymnasium-registered
manager-based environments and their own success terms, unchanged.

Suite ``franka-stack``: the Franka cube-stacking tasks Isaac Lab registers with
relative-pose (differential IK) control, the ones it records demonstrations and trains
robomimic policies on: ``Isaac-Stack-Cube-Franka-IK-Rel-v0`` (state only) and
``Isaac-Stack-Cube-Franka-IK-Rel-Visuomotor-v0`` (plus a table and a wrist camera).
Their env configs (``isaaclab_tasks/manager_based/manipulation/stack``) define the
termination term ``success`` (``cubes_stacked``: red on blue, green on red, gripper
open), which is the episode's success; the time-out (30 s at 20 Hz: 600 controls) and
a cube falling off the table end it too. Isaac Lab's lift tasks (``Isaac-Lift-Cube-
Franka-v0`` and its IK variants) are not listed: they define a reward but no success
term, and an adapter keeps the benchmark's scoring rather than inventing one.

An episode runs in one environment (``num_envs=1``) reset with the episode's seed
(Isaac Lab seeds torch, numpy and its randomisation from it), so the cube layout is
the one Isaac Lab's reset events draw for that seed. One step is one ``env.step``.

Canonical features (from the ``policy`` observation group): ``state``, 9-D float32:
end-effector position in the environment frame 3, orientation quaternion (w, x, y, z)
4, finger positions 2; ``images.primary`` / ``images.wrist``: the visuomotor task's
``table_cam`` / ``wrist_cam`` RGB, built at ``image_size`` square (Isaac Lab's config
says 84), which Isaac Lab renders every step; ``instruction``: a sentence naming the
stacking order (Isaac Lab has no language); privileged ``privileged.state``: the
39-D ``object`` term (cube poses and their offsets). Actions: 7-D, the relative
end-effector pose command (xyz, rotation vector; Isaac Lab scales it by 0.5) and the
gripper (Isaac Lab's rule: < 0 closes, otherwise opens).

The protocol is declared here, not in :data:`workbench.contracts.protocols.PROTOCOLS`
(the six protocols of the source paper). Needs Isaac Lab and Isaac Sim (NVIDIA's
package index), an NVIDIA RTX GPU (Isaac Sim's renderer needs RT cores; A100, H100
and H200 have none) and network access to NVIDIA's Nucleus asset server at run time.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, CachedEnvAdapter, StepResult, SuiteTable
from workbench.benchmarks.gating import (as_numpy, gpu_names, has_rt_cores, missing_packages,
                                         readiness_text, refuse)
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import ContractError, get_protocol

VISUOMOTOR = "Isaac-Stack-Cube-Franka-IK-Rel-Visuomotor-v0"
# Gym ids from isaaclab_tasks/manager_based/manipulation/stack/config/franka/__init__.py
# of github.com/isaac-sim/IsaacLab.
SUITES = {"franka-stack": ("Isaac-Stack-Cube-Franka-IK-Rel-v0", VISUOMOTOR)}
CAMERAS = {"images.primary": "table_cam", "images.wrist": "wrist_cam"}
STEP_LIMIT = 600  # episode_length_s 30 / (sim.dt 0.01 * decimation 5), stack_env_cfg.py
INSTRUCTION = "stack the red cube on the blue cube, then the green cube on the red cube"
INSTALL = ("pip install 'isaaclab[isaacsim,all]' --extra-index-url https://pypi.nvidia.com "
           "(Isaac Sim's wheels come from NVIDIA's index; the PyPI isaacsim is a stub)")
PACKAGES = {"isaaclab": INSTALL, "isaaclab_tasks": INSTALL, "isaacsim": INSTALL}


PROTOCOL = get_protocol("isaaclab-franka-ik-rel-v1")


def device_reasons(names: Sequence[str]) -> list[str]:
    """Why Isaac Sim cannot render on GPUs of these names (empty when one has RT cores).

    >>> device_reasons(["NVIDIA H200"])
    ['missing device: no RTX GPU (found NVIDIA H200, without RT cores; Isaac Sim needs an RTX GPU)']
    """
    if not names:
        return ["missing device: no NVIDIA GPU (Isaac Sim needs an RTX GPU)"]
    if not any(has_rt_cores(n) for n in names):
        return [f"missing device: no RTX GPU (found {', '.join(names)}, without RT cores; "
                "Isaac Sim needs an RTX GPU)"]
    return []


def missing() -> list[str]:
    """What Isaac Lab lacks here (empty when it can run): packages, an RTX GPU."""
    return missing_packages(PACKAGES) + device_reasons(gpu_names())


def _term(policy_obs: Mapping[str, Any], name: str) -> np.ndarray:
    value = as_numpy(policy_obs[name])
    return value[0] if value.ndim >= 2 else value  # the single environment's row


def isaaclab_state(policy_obs: Mapping[str, Any]) -> np.ndarray:
    """The 9-D float32 state from the ``policy`` group's terms (each (1, n), torch or
    numpy): ``eef_pos`` 3, ``eef_quat`` 4, ``gripper_pos`` 2."""
    state = np.concatenate([_term(policy_obs, k).reshape(-1)
                            for k in ("eef_pos", "eef_quat", "gripper_pos")]).astype(np.float32)
    if state.shape != (9,):
        raise ValueError(f"Isaac Lab stack state is 9-D; got {state.shape}")
    return state


def isaaclab_frame(policy_obs: Mapping[str, Any], camera: str) -> np.ndarray:
    """One camera term (1, H, W, C) as an (H, W, 3) uint8 frame."""
    frame = _term(policy_obs, camera)[..., :3]
    if frame.dtype != np.uint8:
        frame = np.clip(frame, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(frame)


def isaaclab_action(action: np.ndarray) -> np.ndarray:
    """The canonical 7-D action as a (1, 7) float32 batch for the one environment.

    >>> isaaclab_action(np.zeros(7, np.float32)).shape
    (1, 7)
    """
    command = np.asarray(action, np.float32).reshape(-1)
    if command.shape != (7,):
        raise ValueError(f"Isaac Lab's Franka IK-Rel tasks take a 7-D action; got {command.shape}")
    return command[None]


class IsaacLabAdapter(SuiteTable, CachedEnvAdapter, BenchmarkAdapter):
    """Runs Isaac Lab episodes; one Isaac Sim app per process, one environment per task."""

    name = "isaaclab"
    suites = SUITES
    suite_label = "Isaac Lab"
    max_steps = STEP_LIMIT
    protocol = PROTOCOL
    preload = ("isaaclab", "isaaclab_tasks", "workbench.benchmarks.isaaclab")

    def __init__(self, suite: str = "franka-stack", seed: int = 0, image_size: int = 84,
                 device: str = "cuda:0") -> None:
        """image_size: the cameras' square resolution (Isaac Lab's config: 84);
        device: the simulation device."""
        self._tasks = self.suite_tasks(suite)
        self.suite, self.seed, self.image_size, self.device = suite, seed, image_size, device
        self._app: Any = None
        self._init_envs()
        self._task: str | None = None
        self._obs: Mapping[str, Any] | None = None

    @classmethod
    def readiness(cls) -> str:
        return readiness_text(missing())

    def instruction(self, task: str) -> str:
        if task not in self._tasks:
            raise ValueError(f"task {task!r} is not in suite {self.suite!r}")
        return INSTRUCTION

    def _build(self, task: str) -> Any:
        refuse("Isaac Lab", missing())
        if self._app is None:
            from isaaclab.app import AppLauncher

            self._app = AppLauncher(headless=True, enable_cameras=True).app
        import gymnasium as gym

        importlib.import_module("isaaclab_tasks")  # registers the Isaac-* gym ids
        from isaaclab_tasks.utils import parse_env_cfg

        cfg = parse_env_cfg(task, device=self.device, num_envs=1)
        for camera in CAMERAS.values():
            sensor = getattr(cfg.scene, camera, None)
            if sensor is not None:
                sensor.width = sensor.height = self.image_size
        return gym.make(task, cfg=cfg)

    def reset(self, episode: EpisodeSpec) -> None:
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}")
        env = self._environment(episode.task)
        obs, _ = env.reset(seed=episode.seed)
        self._env, self._task, self._obs = env, episode.task, obs["policy"]

    def step(self, action: np.ndarray) -> StepResult:
        if self._env is None:
            raise RuntimeError("IsaacLabAdapter.step() before reset()")
        import torch

        base = self._env.unwrapped
        command = torch.as_tensor(isaaclab_action(action), device=base.device)
        obs, reward, terminated, truncated, info = self._env.step(command)
        self._obs = obs["policy"]
        success = bool(as_numpy(base.termination_manager.get_term("success"))[0])
        done = success or bool(as_numpy(terminated)[0]) or bool(as_numpy(truncated)[0])
        return StepResult(float(as_numpy(reward)[0]), success, done, {})

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._obs is None:
            raise RuntimeError("IsaacLabAdapter.observe() before reset()")
        out: dict[str, Any] = {}
        for name in features:
            if name in CAMERAS:
                out[name] = self.render(name)
            elif name == "state":
                out[name] = isaaclab_state(self._obs)
            elif name == "privileged.state":
                out[name] = _term(self._obs, "object").astype(np.float32)
            elif name == "instruction":
                out[name] = INSTRUCTION
            else:
                self.protocol.feature(name)  # raises naming the declared features
        return out

    def render(self, feature: str = "images.primary") -> np.ndarray:
        """A camera frame from the latest observation (Isaac Lab renders each step)."""
        if CAMERAS[feature] not in self._obs:
            raise ContractError(f"{PROTOCOL.name}: {self._task} has no camera; "
                                f"{feature!r} is served by {VISUOMOTOR}")
        return isaaclab_frame(self._obs, CAMERAS[feature])

    def trajectory_state(self) -> np.ndarray:
        return isaaclab_state(self._obs)
