"""RoboCasa adapter (``robocasa-v1``) around the 24 GR-1 tabletop tasks of RoboCasa's GR00T
fork (github.com/robocasa/robocasa-gr1-tabletop-tasks), their robosuite environments and
success checks, unchanged.

Suite ``tabletop``: the 24 tasks GR00T N1.5 is evaluated on (:data:`TASKS`, the list in
that repository's README), each built as GR00T's client builds
``gr1_unified/<Task>_GR1ArmsAndWaistFourierHands_Env``: the GR-1 with arms, waist and
Fourier hands under absolute joint-position control. An episode's scene (layout,
objects, their placement) is drawn from the episode's seed: numpy's global generator
(as the benchmark's gym wrapper seeds it) and the environment's own generator are both
seeded before the reset, so the same episode starts the same wherever it runs.
Success is the task's ``_check_success()``; an episode ends at the first success or
after ``step_limit`` controls (default 720, the ``--max_episode_steps`` of GR00T's
evaluation command in that README).

Canonical features: ``images.primary``, the ``egoview`` camera (1280x800, as GR00T
renders it), turned upright, letterboxed to a square and resized to ``image_size`` the
way GR00T's client makes its 256x256 ``ego_view``, rendered only when asked for;
``state``, 29-D float32: left arm 7, right arm 7, left hand 6, right hand 6, waist 3
(GR00T's ``fourier_gr1_arms_waist`` order); ``instruction``: the episode's language
(``get_ep_meta()["lang"]``; GR00T's client prefixes it with ``"unlocked_waist: "``).
Actions: 29-D absolute joint targets in the state's order.

Needs the GR-1 fork of ``robocasa`` (not on PyPI: installed from its repository, with
robosuite) and its object assets, which its ``download_tabletop_assets.py`` fetches
into ``robocasa/models/assets/objects/{sketchfab,lightwheel}``. Runs on the CPU
(MuJoCo, EGL or OSMesa rendering).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, CachedEnvAdapter, StepResult, SuiteTable
from workbench.benchmarks.gating import missing_packages, readiness_text, refuse, square_frame
from workbench.benchmarks.robosuite import seed_placements
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import get_protocol

# The 24 GR-1 tabletop tasks, from the README of github.com/robocasa/robocasa-gr1-tabletop-tasks
# (gym ids gr1_unified/<task>_GR1ArmsAndWaistFourierHands_Env).
TASKS = (
    "PnPCupToDrawerClose", "PnPPotatoToMicrowaveClose", "PnPMilkToMicrowaveClose",
    "PnPBottleToCabinetClose", "PnPWineToCabinetClose", "PnPCanToDrawerClose",
    *(f"PosttrainPnPNovelFrom{a}To{b}SplitA" for a, b in (
        ("Cuttingboard", "Basket"), ("Cuttingboard", "Cardboardbox"), ("Cuttingboard", "Pan"),
        ("Cuttingboard", "Pot"), ("Cuttingboard", "Tieredbasket"), ("Placemat", "Basket"),
        ("Placemat", "Bowl"), ("Placemat", "Plate"), ("Placemat", "Tieredshelf"),
        ("Plate", "Bowl"), ("Plate", "Cardboardbox"), ("Plate", "Pan"), ("Plate", "Plate"),
        ("Tray", "Cardboardbox"), ("Tray", "Plate"), ("Tray", "Pot"),
        ("Tray", "Tieredbasket"), ("Tray", "Tieredshelf"))),
)
SUITES = {"tabletop": TASKS}
ROBOT = "GR1ArmsAndWaistFourierHands"
STEP_LIMIT = 720
CAMERA, CAMERA_WIDTH, CAMERA_HEIGHT = "egoview", 1280, 800
# GR-1 parts as robosuite names them (robot0_<part>), in the canonical order, with sizes.
GR1_PARTS = (("left", 7), ("right", 7), ("left_gripper", 6), ("right_gripper", 6),
             ("torso", 3))
STATE_DIM = sum(size for _, size in GR1_PARTS)
INSTALL = ("the GR-1 tabletop fork of RoboCasa is not on PyPI: git clone "
           "https://github.com/robocasa/robocasa-gr1-tabletop-tasks and pip install -e it "
           "beside robosuite (pip install robosuite)")
PACKAGES = {"robocasa": INSTALL, "robosuite": "pip install robosuite",
            "cv2": "pip install opencv-python"}
ASSET_FOLDERS = ("sketchfab", "lightwheel")


def gr1_state(parts: Mapping[str, Any]) -> np.ndarray:
    """The 29-D float32 state from RoboCasa's per-part joint positions (the dict its
    ``gather_robot_observations`` returns: ``robot0_left``, ``robot0_right``,
    ``robot0_left_gripper``, ``robot0_right_gripper``, ``robot0_torso``)."""
    pieces = []
    for part, size in GR1_PARTS:
        value = np.asarray(parts[f"robot0_{part}"], np.float32).reshape(-1)
        if value.shape != (size,):
            raise ValueError(f"GR-1 part robot0_{part}: expected {size} values; got {value.shape}")
        pieces.append(value)
    return np.concatenate(pieces)


def gr1_action_parts(action: np.ndarray) -> dict[str, np.ndarray]:
    """Split a 29-D action into robosuite's per-part targets (``left`` ... ``torso``).

    >>> {k: v.shape[0] for k, v in gr1_action_parts(np.zeros(29, np.float32)).items()}
    {'left': 7, 'right': 7, 'left_gripper': 6, 'right_gripper': 6, 'torso': 3}
    """
    action = np.asarray(action, np.float64).reshape(-1)
    if action.shape != (STATE_DIM,):
        raise ValueError(f"GR-1 takes a {STATE_DIM}-D action; got {action.shape}")
    out, start = {}, 0
    for part, size in GR1_PARTS:
        out[part] = action[start:start + size].copy()
        start += size
    return out


def flat_action(parts: Mapping[str, np.ndarray], split_indexes: Mapping[str, tuple[int, int]],
                size: int) -> np.ndarray:
    """The robosuite action vector: each part's target at the slice its composite
    controller assigns (``_action_split_indexes``); every controller part must be given.

    >>> flat_action({"a": np.ones(2), "b": np.zeros(1)}, {"b": (0, 1), "a": (1, 3)}, 3).tolist()
    [0.0, 1.0, 1.0]
    """
    if set(parts) != set(split_indexes):
        raise ValueError(f"controller parts {sorted(split_indexes)} != "
                         f"action parts {sorted(parts)}")
    command = np.zeros(size)
    for part, (start, end) in split_indexes.items():
        command[start:end] = parts[part]
    return command


def egoview_frame(raw: np.ndarray, size: int) -> np.ndarray:
    """A MuJoCo egoview render (rows bottom-up) as GR00T's client shows it: upright,
    letterboxed to a square, resized to ``(size, size)``."""
    return square_frame(raw[::-1], size)


def task_description(task: str) -> str:
    """Words of a task's class name (the episode's own instruction names the objects).

    >>> task_description("PnPCupToDrawerClose")
    'pick and place cup to drawer close'
    """
    words = re.findall(r"[A-Z][a-z]*|[a-z]+", task.replace("PnP", "PickAndPlace"))
    return " ".join(w.lower() for w in words if w not in ("Posttrain", "Split", "A"))


def package_dir() -> Path | None:
    """Where the installed ``robocasa`` package lives (found without importing it)."""
    spec = importlib.util.find_spec("robocasa")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def missing() -> list[str]:
    """What the GR-1 tabletop tasks lack here (empty when they can run)."""
    reasons = missing_packages(PACKAGES)
    root = package_dir()
    if root is None:
        return reasons
    if not (root / "environments" / "tabletop" / "tabletop.py").exists():
        reasons.append(f"the robocasa at {root} is not the GR-1 tabletop fork "
                       f"(no environments/tabletop); {INSTALL}")
    for folder in ASSET_FOLDERS:
        path = root / "models" / "assets" / "objects" / folder
        if not path.is_dir():
            reasons.append(f"missing assets: {path} (python robocasa/scripts/"
                           "download_tabletop_assets.py -y in the fork's checkout)")
    return reasons


def _reseed(env: Any, seed: int) -> None:
    """Seed numpy's global generator (the benchmark's gym wrapper does) and give the
    environment and its placement samplers one fresh generator."""
    np.random.seed(seed % 2**32)
    seed_placements(env, seed)


class RoboCasaAdapter(SuiteTable, CachedEnvAdapter, BenchmarkAdapter):
    """Runs RoboCasa GR-1 tabletop episodes; keeps one environment per task for its life."""

    name = "robocasa"
    suites = SUITES
    suite_label = "RoboCasa"
    max_steps = STEP_LIMIT
    protocol = get_protocol("robocasa-v1")
    preload = ("robosuite", "robocasa", "workbench.benchmarks.robocasa")

    def __init__(self, suite: str = "tabletop", seed: int = 0, image_size: int = 256,
                 step_limit: int | None = None) -> None:
        """image_size: side of the square ``images.primary`` (GR00T uses 256);
        step_limit: controls per episode (default 720)."""
        self._tasks = self.suite_tasks(suite)
        self.suite, self.seed, self.image_size = suite, seed, image_size
        self.max_steps = step_limit or type(self).max_steps
        self._init_envs()
        self._task: str | None = None
        self._lang = ""
        self._steps = 0

    @classmethod
    def readiness(cls) -> str:
        return readiness_text(missing())

    def instruction(self, task: str) -> str:
        """The current episode's language when ``task`` is running, else the task's name
        in words (the objects are drawn per episode)."""
        if task not in TASKS:
            raise ValueError(f"unknown RoboCasa task {task!r}; tasks: {list(TASKS)}")
        return self._lang if task == self._task and self._lang else task_description(task)

    def _build(self, task: str) -> Any:
        refuse("RoboCasa GR-1 tabletop", missing())
        from robocasa.utils.gym_utils.gymnasium_basic import RoboCasaEnv

        wrapper = RoboCasaEnv(env_name=task, robots_name=ROBOT, enable_render=True,
                              camera_widths=CAMERA_WIDTH, camera_heights=CAMERA_HEIGHT)
        return wrapper.env

    @staticmethod
    def _camera_on_demand(env: Any) -> None:
        """Turn the egoview observable off: frames are rendered by :meth:`render` when
        read, not by robosuite at every step (set again after each reset, which may
        rebuild the observables)."""
        env.modify_observable(observable_name=f"{CAMERA}_image", attribute="enabled",
                              modifier=False)

    def reset(self, episode: EpisodeSpec) -> None:
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}")
        env = self._environment(episode.task)
        _reseed(env, episode.seed)
        env.reset()
        self._camera_on_demand(env)
        self._env, self._task, self._steps = env, episode.task, 0
        self._lang = str(env.get_ep_meta().get("lang", ""))

    def step(self, action: np.ndarray) -> StepResult:
        if self._env is None:
            raise RuntimeError("RoboCasaAdapter.step() before reset()")
        robot = self._env.robots[0]
        controller = robot.composite_controller
        command = flat_action(gr1_action_parts(action), controller._action_split_indexes,
                              controller.action_limits[0].shape[0])
        _, reward, _, info = self._env.step(command)
        self._steps += 1
        success = bool(self._env._check_success())
        return StepResult(float(reward), success, success or self._steps >= self.max_steps, info)

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._env is None:
            raise RuntimeError("RoboCasaAdapter.observe() before reset()")
        out: dict[str, Any] = {}
        for name in features:
            if name == "images.primary":
                out[name] = self.render(name)
            elif name == "state":
                out[name] = self.trajectory_state()
            elif name == "instruction":
                out[name] = self._lang
            else:
                self.protocol.feature(name)  # raises naming the declared features
        return out

    def render(self, feature: str = "images.primary") -> np.ndarray:
        """The egoview frame (image_size, image_size, 3) uint8, rendered now."""
        raw = self._env.sim.render(width=CAMERA_WIDTH, height=CAMERA_HEIGHT, camera_name=CAMERA)
        return egoview_frame(raw, self.image_size)

    def trajectory_state(self) -> np.ndarray:
        from robocasa.models.robots import gather_robot_observations

        return gr1_state(gather_robot_observations(self._env))

    def mujoco_data(self) -> Any:
        return None if self._env is None else self._env.sim.data._data
