"""RoboTwin 2.0 adapter (``robotwin2-v1``) around a RoboTwin 2.0 checkout's own task
classes, seed validation, instructions and ``check_success``, unchanged.

Suites are RoboTwin's two task configurations, ``demo_clean`` and ``demo_randomized``
(``task_config/<suite>.yml``: the aloha-agilex dual-arm robot, D435 head and wrist
cameras; the second adds clutter, backgrounds, lighting and table-height
randomisation). Each has the 50 tasks of :data:`STEP_LIMITS` (RoboTwin's
``task_config/_eval_step_limit.yml``, which also gives each task's step limit).

Which scenes are evaluated, as RoboTwin's ``script/eval_policy.py`` decides: candidate
seeds run upwards from ``100000 * (1 + seed)``; a candidate is kept only when the
task's scripted expert solves it (``setup_demo`` then ``play_once`` without an
unstable scene, ``plan_success`` and ``check_success()``); episode ``k``
(``init_state_id`` ``k``) is the ``k``-th kept seed. Expert runs are slow, so kept
seeds are cached with the expert's episode info (``$WORKBENCH_CACHE/robotwin``; the
bookkeeping is :func:`extend_seed_cache`). The instruction is drawn from the task's
``unseen`` (or ``seen``) templates filled from that episode info, with Python's and
numpy's generators seeded by the episode's seed (the official script draws from
whatever state they are in). One step is one ``take_action`` of a 14-D joint target
(RoboTwin plans and executes it over many physics steps); the episode succeeds when
``take_action`` sees ``check_success()`` (``eval_success``) and ends then or at the
task's step limit.

Canonical features: ``images.head``, ``images.left_wrist``, ``images.right_wrist``
(``head_camera``, ``left_camera``, ``right_camera``; 320x240 native, letterboxed to a
square and resized to ``image_size``), rendered only when a camera is asked for (one
``get_obs()`` a step serves all three); ``state``: 14-D float32 joint state, left arm
6, left gripper, right arm 6, right gripper (grippers 0 closed to 1 open), read from
the robot without rendering; ``instruction``. Actions: the same 14-D layout, absolute.

Needs a RoboTwin 2.0 checkout (``root`` or ``$ROBOTWIN_ROOT``: its ``envs/``,
``task_config/``, ``description/`` and the assets its ``script/_download_assets.sh``
fetches), SAPIEN and mplib, and a CUDA GPU. RoboTwin's code reads assets relative to
the working directory, so the adapter enters the checkout while it builds scenes.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, StepResult, SuiteTable, cache_dir
from workbench.benchmarks.gating import (gpu_names, missing_packages, readiness_text, refuse,
                                         square_frame)
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import get_protocol

# Task -> step limit, from task_config/_eval_step_limit.yml of RoboTwin 2.0
# (github.com/RoboTwin-Platform/RoboTwin); the 50 tasks of both suites.
STEP_LIMITS: dict[str, int] = {
    "adjust_bottle": 400, "beat_block_hammer": 400, "blocks_ranking_rgb": 1200,
    "blocks_ranking_size": 1200, "click_alarmclock": 400, "click_bell": 400,
    "dump_bin_bigbin": 600, "grab_roller": 400, "handover_block": 800, "handover_mic": 600,
    "lift_pot": 400, "move_can_pot": 400, "move_playingcard_away": 400,
    "move_stapler_pad": 400, "hanging_mug": 900, "open_laptop": 700, "open_microwave": 1500,
    "pick_diverse_bottles": 400, "pick_dual_bottles": 400, "place_a2b_left": 400,
    "place_a2b_right": 400, "place_bread_basket": 700, "place_bread_skillet": 500,
    "place_can_basket": 700, "place_cans_plasticbox": 800, "place_container_plate": 400,
    "place_dual_shoes": 600, "place_empty_cup": 500, "place_fan": 400,
    "place_burger_fries": 500, "place_mouse_pad": 400, "place_object_basket": 700,
    "place_object_scale": 400, "place_object_stand": 400, "place_phone_stand": 400,
    "move_pillbottle_pad": 400, "place_shoe": 500, "press_stapler": 400,
    "put_bottles_dustbin": 1700, "put_object_cabinet": 700, "rotate_qrcode": 400,
    "scan_object": 500, "shake_bottle": 700, "shake_bottle_horizontally": 700,
    "stack_blocks_three": 1200, "stack_blocks_two": 800, "stack_bowls_three": 1200,
    "stack_bowls_two": 900, "stamp_seal": 400, "turn_switch": 400,
}
SUITES = ("demo_clean", "demo_randomized")
CAMERAS = {"images.head": "head_camera", "images.left_wrist": "left_camera",
           "images.right_wrist": "right_camera"}
STATE_DIM = 14
SEED_STRIDE = 100000  # eval_policy.py: st_seed = 100000 * (1 + seed)
ROOT_VARIABLE = "ROBOTWIN_ROOT"
ASSET_FOLDERS = ("assets/embodiments/aloha-agilex", "assets/objects", "assets/background_texture")
SOURCE_FILES = ("envs/_base_task.py", "description/utils/generate_episode_instructions.py")
INSTALL = ("git clone https://github.com/RoboTwin-Platform/RoboTwin, run its "
           "script/_install.sh and script/_download_assets.sh, and set $ROBOTWIN_ROOT")
PACKAGES = {"sapien": "pip install sapien==3.0.0b1 (RoboTwin's script/_install.sh)",
            "mplib": "pip install mplib==0.2.1", "yaml": "pip install pyyaml"}


def config_dir(root: Path) -> Path:
    """The checkout's task-config folder (``task_config/``; ``env_cfg/task_config/`` in
    layouts after RoboTwin moved to XPolicyLab)."""
    newer = root / "env_cfg" / "task_config"
    return newer if newer.is_dir() and not (root / "task_config").is_dir() else root / "task_config"


def missing(root: str | os.PathLike | None = None) -> list[str]:
    """What RoboTwin 2.0 lacks here (empty when it can run): packages, the checkout and
    its assets (exact paths), a CUDA GPU."""
    reasons = missing_packages(PACKAGES)
    value = root or os.environ.get(ROOT_VARIABLE)
    if not value:
        reasons.append(f"missing assets: no RoboTwin 2.0 checkout; {INSTALL} (or pass root=)")
    else:
        base = Path(value)
        for rel in SOURCE_FILES + ASSET_FOLDERS:
            if not (base / rel).exists():
                reasons.append(f"missing assets: {base / rel} ({INSTALL})")
        for suite in SUITES:
            if not (config_dir(base) / f"{suite}.yml").exists():
                reasons.append(f"missing assets: {config_dir(base) / f'{suite}.yml'}")
    if not gpu_names():
        reasons.append("missing device: no CUDA GPU (RoboTwin's SAPIEN renderer and "
                       "mplib/cuRobo planners need an NVIDIA GPU with Vulkan)")
    return reasons


def episode_args(task: str, suite: str, config: Mapping[str, Any],
                 embodiments: Mapping[str, Any], cameras: Mapping[str, Any],
                 root: Path, embodiment_config: Callable[[Path], dict]) -> dict[str, Any]:
    """The keyword arguments RoboTwin's evaluation passes to ``setup_demo``: the suite's
    task config plus the derived entries its ``eval_policy.py`` adds (head camera size,
    each arm's robot folder, absolute here, and embodiment config), in evaluation mode,
    without the viewer or RoboTwin's own video.

    config: the parsed ``<suite>.yml``; embodiments: ``_embodiment_config.yml``;
    cameras: ``_camera_config.yml``; embodiment_config: reads a robot folder's config.yml.
    """
    args = dict(config, task_name=task, task_config=suite, eval_mode=True, render_freq=0,
                eval_video_log=False)
    head = cameras[args["camera"]["head_camera_type"]]
    args["head_camera_h"], args["head_camera_w"] = head["h"], head["w"]
    kinds = list(args["embodiment"])
    if len(kinds) not in (1, 3):
        raise ValueError(f"RoboTwin embodiment must list 1 or 3 items; got {kinds}")
    folders = [root / embodiments[k]["file_path"] for k in kinds[:len(kinds) - 1 or 1]]
    if len(kinds) == 1:
        args["left_robot_file"] = args["right_robot_file"] = str(folders[0])
        args["dual_arm_embodied"] = True
    elif len(kinds) == 3:
        args["left_robot_file"], args["right_robot_file"] = str(folders[0]), str(folders[1])
        args["embodiment_dis"], args["dual_arm_embodied"] = kinds[2], False
    args["left_embodiment_config"] = embodiment_config(Path(args["left_robot_file"]))
    args["right_embodiment_config"] = embodiment_config(Path(args["right_robot_file"]))
    return args


@dataclass
class SeedCache:
    """Kept seeds of one (suite, task, start): ``seeds[k]`` is episode ``k``'s, ``infos[k]``
    the expert's episode info for its instruction; ``next`` is the next candidate."""

    start: int
    next: int
    seeds: list[int] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)


def extend_seed_cache(cache: SeedCache, count: int,
                      expert: Callable[[int], dict[str, Any] | None]) -> SeedCache:
    """Try candidates from ``cache.next`` upwards until ``count`` seeds are kept.
    ``expert(seed)`` returns the episode info when the scripted expert solves the seed,
    None when it does not (or the scene is unstable).

    >>> c = extend_seed_cache(SeedCache(100, 100), 2, lambda s: {} if s % 2 else None)
    >>> c.seeds, c.next
    ([101, 103], 104)
    """
    seeds, infos, candidate = list(cache.seeds), list(cache.infos), cache.next
    while len(seeds) < count:
        info = expert(candidate)
        if info is not None:
            seeds.append(candidate)
            infos.append(info)
        candidate += 1
    return SeedCache(cache.start, candidate, seeds, infos)


def joint_state(left: Sequence[float], right: Sequence[float]) -> np.ndarray:
    """The 14-D float32 state from the robot's two arm joint states, each arm's joints
    then its gripper (RoboTwin's ``get_left/right_arm_jointState``).

    >>> joint_state([0.1] * 6 + [1.0], [0.2] * 6 + [0.0])[[5, 6, 13]].tolist()
    [0.10000000149011612, 1.0, 0.0]
    """
    state = np.asarray(list(left) + list(right), np.float32)
    if state.shape != (STATE_DIM,):
        raise ValueError(f"RoboTwin state is {STATE_DIM}-D for aloha-agilex; got {state.shape}")
    return state


def robotwin_action(action: np.ndarray) -> np.ndarray:
    """The canonical 14-D action as ``take_action`` takes a qpos target (float64 copy)."""
    command = np.asarray(action, np.float64).reshape(-1).copy()
    if command.shape != (STATE_DIM,):
        raise ValueError(f"RoboTwin takes a {STATE_DIM}-D joint target; got {command.shape}")
    return command


def camera_frames(native: Mapping[str, Any], features: Sequence[str],
                  size: int) -> dict[str, np.ndarray]:
    """The requested camera features from a ``get_obs()`` dict
    (``observation[<camera>]["rgb"]``), each letterboxed and resized to ``size``."""
    return {name: square_frame(np.asarray(native["observation"][CAMERAS[name]]["rgb"], np.uint8),
                               size) for name in features}


class RoboTwinAdapter(SuiteTable, BenchmarkAdapter):
    """Runs RoboTwin 2.0 episodes; keeps one task object per task for its life."""

    name = "robotwin"
    suites = {suite: tuple(sorted(STEP_LIMITS)) for suite in SUITES}
    suite_label = "RoboTwin"
    max_steps = max(STEP_LIMITS.values())
    protocol = get_protocol("robotwin2-v1")
    preload = ("sapien", "mplib", "workbench.benchmarks.robotwin")

    def __init__(self, suite: str = "demo_clean", seed: int = 0, image_size: int = 320,
                 root: str | None = None, instruction_type: str = "unseen") -> None:
        """seed: the evaluation seed (candidates start at 100000 * (1 + seed));
        image_size: side of the square camera frames (320 keeps the native width);
        root: the RoboTwin checkout (default ``$ROBOTWIN_ROOT``); instruction_type:
        ``unseen`` (RoboTwin's evaluation default) or ``seen`` templates."""
        self._tasks = self.suite_tasks(suite)
        if instruction_type not in ("seen", "unseen"):
            raise ValueError("instruction_type: expected 'seen' or 'unseen'; "
                             f"got {instruction_type!r}")
        self.suite, self.seed, self.image_size = suite, seed, image_size
        self.root, self.instruction_type = root, instruction_type
        self._envs: dict[str, Any] = {}
        self._env: Any = None
        self._task: str | None = None
        self._instruction = ""
        self._frames: tuple[int, dict[str, Any]] | None = None
        self._checkout: Path | None = None
        self._episodes = 0

    @classmethod
    def readiness(cls) -> str:
        return readiness_text(missing())

    def _root(self) -> Path:
        """The checkout, on ``sys.path``; refuses, naming what is missing, when it can't run."""
        if self._checkout is None:
            refuse("RoboTwin 2.0", missing(self.root))
            root = Path(self.root or os.environ[ROOT_VARIABLE]).resolve()
            for entry in (root, root / "description" / "utils"):
                if str(entry) not in sys.path:
                    sys.path.append(str(entry))
            self._checkout = root
        return self._checkout

    def instruction(self, task: str) -> str:
        """The current episode's instruction when ``task`` is running, else the task's
        ``full_description`` from the checkout (its name in words without one; never
        refuses: the refusal belongs to ``reset``)."""
        if task not in STEP_LIMITS:
            raise ValueError(f"unknown RoboTwin task {task!r}; tasks: {sorted(STEP_LIMITS)}")
        if task == self._task and self._instruction:
            return self._instruction
        root = self.root or os.environ.get(ROOT_VARIABLE)
        path = Path(root or ".") / "description" / "task_instruction" / f"{task}.json"
        if root and path.exists():
            return json.loads(path.read_text())["full_description"]
        return task.replace("_", " ")

    def _args(self, root: Path, task: str) -> dict[str, Any]:
        import yaml

        def load(path: Path) -> Any:
            return yaml.safe_load(path.read_text())

        folder = config_dir(root)
        return episode_args(task, self.suite, load(folder / f"{self.suite}.yml"),
                            load(folder / "_embodiment_config.yml"),
                            load(folder / "_camera_config.yml"), root,
                            lambda robot: load(robot / "config.yml"))

    def _environment(self, task: str) -> tuple[Any, dict[str, Any]]:
        if task not in self._envs:
            root = self._root()
            module = importlib.import_module(f"envs.{task}")
            self._envs[task] = (getattr(module, task)(), self._args(root, task))
        return self._envs[task]

    def _expert(self, env: Any, args: dict[str, Any], seed: int) -> dict[str, Any] | None:
        with contextlib.chdir(self._root()):
            try:
                env.setup_demo(now_ep_num=0, seed=seed, is_test=True, **args)
                info = env.play_once()
                ok = bool(env.plan_success and env.check_success())
            except Exception:  # an unstable scene or a failed plan: not a kept seed
                ok, info = False, None
            finally:
                env.close_env()
        return dict(info.get("info", {})) if ok and info else None

    def _seed_for(self, task: str, index: int, env: Any, args: dict[str, Any]) -> tuple[int, dict]:
        start = SEED_STRIDE * (1 + self.seed)
        path = cache_dir() / "robotwin" / self.suite / f"{task}-{start}.json"
        cache = (SeedCache(**json.loads(path.read_text())) if path.exists()
                 else SeedCache(start, start))
        if len(cache.seeds) <= index:
            cache = extend_seed_cache(cache, index + 1, lambda s: self._expert(env, args, s))
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(cache.__dict__))
            tmp.replace(path)
        return cache.seeds[index], cache.infos[index]

    def reset(self, episode: EpisodeSpec) -> None:
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}")
        self._close_episode()
        env, args = self._environment(episode.task)
        seed, info = self._seed_for(episode.task, episode.init_state_id, env, args)
        with contextlib.chdir(self._root()):
            env.setup_demo(now_ep_num=episode.init_state_id, seed=seed, is_test=True, **args)
            from generate_episode_instructions import generate_episode_descriptions

            random.seed(episode.seed)
            np.random.seed(episode.seed % 2**32)
            texts = generate_episode_descriptions(episode.task, [info], 100)[0]
            texts = texts[self.instruction_type]
            self._instruction = str(np.random.choice(texts))
        env.set_instruction(instruction=self._instruction)
        self._env, self._task, self._frames = env, episode.task, None

    def _close_episode(self) -> None:
        """Release the running episode's scene as RoboTwin's evaluation does between
        episodes, clearing SAPIEN's cache every ``clear_cache_freq`` episodes."""
        if self._env is None:
            return
        self._episodes += 1
        every = int(self._envs[self._task][1].get("clear_cache_freq", 1) or 1)
        with contextlib.chdir(self._root()):
            self._env.close_env(clear_cache=self._episodes % every == 0)
        self._env = None

    def step(self, action: np.ndarray) -> StepResult:
        if self._env is None:
            raise RuntimeError("RoboTwinAdapter.step() before reset()")
        self._env.take_action(robotwin_action(action))
        self._frames = None
        success = bool(self._env.eval_success)
        done = success or self._env.take_action_cnt >= STEP_LIMITS[self._task]
        return StepResult(float(success), success, done,
                          {"take_action_cnt": self._env.take_action_cnt})

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._env is None:
            raise RuntimeError("RoboTwinAdapter.observe() before reset()")
        out: dict[str, Any] = {}
        cameras = [f for f in features if f in CAMERAS]
        if cameras:
            out.update(camera_frames(self._native(), cameras, self.image_size))
        for name in features:
            if name == "state":
                out[name] = self.trajectory_state()
            elif name == "instruction":
                out[name] = self._instruction
            elif name not in CAMERAS:
                self.protocol.feature(name)  # raises naming the declared features
        return out

    def _native(self) -> dict[str, Any]:
        """RoboTwin's ``get_obs()`` (renders every camera), once per step."""
        count = self._env.take_action_cnt
        if self._frames is None or self._frames[0] != count:
            self._frames = (count, self._env.get_obs())
        return self._frames[1]

    def trajectory_state(self) -> np.ndarray:
        robot = self._env.robot
        return joint_state(robot.get_left_arm_jointState(), robot.get_right_arm_jointState())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._close_episode()
        self._envs.clear()
        self._env = None
