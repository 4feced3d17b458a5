"""CALVIN adapter (``calvin-v1``) around calvin_env's PyBullet play table, its task oracle
and the official long-horizon evaluation (LH-MTLC): 1000 chains of five language
subtasks in environment D.

Suites are the three splits, named as CALVIN's dataset folders: ``task_D_D``,
``task_ABC_D`` and ``task_ABCD_D``; all three evaluate in environment D (the split
says where the policy was trained). Each has one task, :data:`TASK` (``lh-mtlc``);
episode ``i`` (``init_state_id`` ``i``) is chain ``i`` of :func:`chain_schedule`.

How the official 1000 chains are drawn (``get_sequences(1000)`` in the CALVIN
repository's ``evaluation/multistep_sequences.py``, reproduced by
:func:`draw_schedule`, whose output ships as the manifest :func:`chain_schedule`
reads): the symbolic initial conditions are every combination of
led, lightbulb, slider, drawer and the three blocks' places in which one or two
blocks are on the table and at most one block sits on each side of the slider (192
conditions, :func:`initial_conditions`); the 1000 chains are split over them in
order (``numpy.array_split``: the first 40 get six, the rest five); for condition
``k`` a generator seeded ``k`` draws five distinct subtask names at a time until it
has its share of chains in which every subtask's precondition holds in exactly one
way in the state the previous subtask left and no two subtasks share a category; the
(condition, chain) pairs are then shuffled by a generator seeded 0. The scene of a
condition (:func:`scene_for_condition`) places the blocks with a generator seeded by
the FNV-1 hash of the condition's values, as the official evaluation does.
Evaluating fewer chains means the first ones of this order (fewer episodes).

An episode runs the chain's subtasks in order, each for at most
:data:`SUBTASK_STEPS` (360) controls; a subtask is solved when calvin_env's task
oracle reports it between the subtask's start and now. The episode ends at the first
failure or after the fifth success; ``success`` is all five, and ``info["completed"]``
(and :attr:`CalvinAdapter.completed`) is how many subtasks in a row were solved, the
number CALVIN averages (:func:`average_chain_length`, :func:`chain_success_rates`).
The official evaluator resets the policy at each subtask; here the policy is reset
once per chain and sees the instruction change in ``observe(["instruction"])``.
A step is calvin_env's own step less its camera render (cameras are rendered only
when a feature asks for them).

Canonical features: ``images.static`` and ``images.gripper`` (calvin_env's static and
gripper cameras, each rendered only when asked, at ``image_size`` square: the
official cameras are 200x200 and 84x84); ``state``: ``robot_obs``, 15-D float32
(tool-centre-point position 3, euler orientation 3, gripper opening width 1, arm
joints 7, last gripper action 1); ``instruction``: the current subtask's validation
annotation; privileged ``privileged.state``: ``scene_obs``, 24-D. Actions: 7-D
relative end-effector displacement (xyz, euler xyz) in [-1, 1], which calvin_env
scales by 0.02 m and 0.05 rad, and the gripper, binarised as CALVIN's own wrapper
does (> 0 opens: +1, otherwise closes: -1).

Needs calvin_env (not on PyPI: installed from the CALVIN repository) and a CALVIN
dataset split, found under ``dataset_dir`` or ``$CALVIN_DATASET``: the environment is
built from ``<split>/validation/.hydra/merged_config.yaml``.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from workbench.benchmarks.base import BenchmarkAdapter, StepResult, SuiteTable
from workbench.benchmarks.calvin_tasks import CATEGORIES, INSTRUCTIONS, SUBTASKS, TRANSITIONS
from workbench.benchmarks.gating import missing_packages, readiness_text, refuse
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import get_protocol

SUITES = ("task_D_D", "task_ABC_D", "task_ABCD_D")
TASK = "lh-mtlc"
NUM_CHAINS = 1000
CHAIN_LENGTH = 5
SUBTASK_STEPS = 360  # EP_LEN in the CALVIN repository's evaluation/evaluate_policy.py
CAMERAS = {"images.static": "static", "images.gripper": "gripper"}
DATASET_VARIABLE = "CALVIN_DATASET"
MANIFEST = Path(__file__).resolve().parents[1] / "data" / "calvin_chains_1000.txt"
MANIFEST_HEADER = (
    "# CALVIN's 1000 evaluation chains in evaluation order (get_sequences(1000) in\n"
    "# github.com/mees/calvin calvin_models/calvin_agent/evaluation/multistep_sequences.py),\n"
    "# drawn by workbench.benchmarks.calvin.draw_schedule. Each line: the index of the\n"
    "# initial condition in initial_conditions(), then the five subtasks.\n")
ENV_CONFIG = Path("validation") / ".hydra" / "merged_config.yaml"
TASK_CONFIG = Path("conf") / "tasks" / "new_playtable_tasks.yaml"
INSTALL = ("CALVIN is not on PyPI: git clone --recurse-submodules "
           "https://github.com/mees/calvin and run its install.sh (installs calvin_env "
           "and tacto editable)")
PACKAGES = {"calvin_env": INSTALL, "pybullet": "pip install pybullet",
            "hydra": "pip install hydra-core"}

# The robot's neutral pose at the start of every chain (robot_obs, 15-D), and where
# the blocks go, from get_env_state_for_initial_condition in the CALVIN repository's
# calvin_models/calvin_agent/evaluation/utils.py.
NEUTRAL_ROBOT = np.array([0.02586889, -0.2313129, 0.5712808, 3.09045411, -0.02908596,
                          1.50013585, 0.07999963, -1.21779124, 1.03987629, 2.11978254,
                          -2.34205014, -0.87015899, 1.64119093, 0.55344928, 1.0])
_SLIDER_LEFT = (-2.40851662e-01, 9.24044687e-02, 4.60990009e-01)
_SLIDER_RIGHT = (7.03416330e-02, 9.24044687e-02, 4.60990009e-01)
_TABLE = ((5.00000896e-02, -1.20000177e-01, 4.59990009e-01),
          (2.29995412e-01, -1.19995140e-01, 4.59990010e-01))
_YAW_RANGE = (np.pi / 2 - np.pi / 8, np.pi / 2 + np.pi / 8)

# The symbolic condition's variables, in the official order (their order matters: it
# is hashed and enumerated).
CONDITION_VALUES: dict[str, tuple[Any, ...]] = {
    "led": (0, 1), "lightbulb": (0, 1), "slider": ("right", "left"),
    "drawer": ("closed", "open"),
    "red_block": ("table", "slider_right", "slider_left"),
    "blue_block": ("table", "slider_right", "slider_left"),
    "pink_block": ("table", "slider_right", "slider_left"),
    "grasped": (0,),
}


def initial_conditions() -> list[dict[str, Any]]:
    """The 192 symbolic initial conditions, in the official order.

    >>> conditions = initial_conditions()
    >>> len(conditions), conditions[0]["red_block"], conditions[0]["pink_block"]
    (192, 'table', 'slider_right')
    """
    out = []
    for values in itertools.product(*CONDITION_VALUES.values()):
        blocks = values[4:7]
        if (blocks.count("table") in (1, 2) and blocks.count("slider_right") < 2
                and blocks.count("slider_left") < 2):
            out.append(dict(zip(CONDITION_VALUES, values)))
    return out


def _holds(state: dict[str, Any], condition: dict[str, Any]) -> bool:
    return all(state[k] in v if isinstance(v, tuple) else state[k] == v
               for k, v in condition.items())


def subtask_outcomes(state: dict[str, Any], subtask: str) -> list[dict[str, Any]]:
    """The symbolic states ``subtask`` can leave from ``state``, one per transition
    whose precondition holds (empty when the subtask is not possible)."""
    return [{**state, **effect} for condition, effect in TRANSITIONS[subtask]
            if _holds(state, condition)]


def chain_is_feasible(state: dict[str, Any], chain: Sequence[str]) -> bool:
    """Whether each subtask of ``chain`` is possible in exactly one way in turn from
    ``state``, with no two subtasks of one category."""
    for subtask in chain:
        outcomes = subtask_outcomes(state, subtask)
        if len(outcomes) != 1:
            return False
        state = outcomes[0]
    categories = [CATEGORIES[s] for s in chain]
    return len(set(categories)) == len(categories)


def draw_chains(condition: dict[str, Any], count: int, seed: int) -> list[tuple[str, ...]]:
    """The first ``count`` feasible chains a generator seeded ``seed`` draws for
    ``condition``, five distinct subtasks at a time (``permutation(34)[:5]``, the
    indices ``RandomState.choice(..., replace=False)`` takes). About 50 ms a chain."""
    rng = np.random.RandomState(seed)
    chains: list[tuple[str, ...]] = []
    while len(chains) < count:
        chain = tuple(SUBTASKS[i] for i in rng.permutation(len(SUBTASKS))[:CHAIN_LENGTH])
        if chain_is_feasible(condition, chain):
            chains.append(chain)
    return chains


def draw_schedule(num_chains: int = NUM_CHAINS) -> list[tuple[int, tuple[str, ...]]]:
    """Draw the evaluation schedule as CALVIN's ``get_sequences(num_chains)`` does (see
    the module docstring): (index into :func:`initial_conditions`, five subtasks) pairs
    in evaluation order. Slow (about a minute for 1000); :func:`chain_schedule` reads
    the 1000 drawn once from the manifest shipped with the workbench."""
    conditions = initial_conditions()
    shares = [len(part) for part in np.array_split(np.arange(num_chains), len(conditions))]
    pairs: list[tuple[int, tuple[str, ...]]] = []
    for k, (condition, share) in enumerate(zip(conditions, shares)):
        pairs.extend((k, chain) for chain in draw_chains(condition, share, seed=k))
    np.random.RandomState(0).shuffle(pairs)
    return pairs


def write_manifest(pairs: Sequence[tuple[int, Sequence[str]]], path: str | os.PathLike) -> None:
    """Write a schedule as the manifest :func:`chain_schedule` reads: one chain a line,
    the condition's index then the five subtasks."""
    lines = [f"{k} {' '.join(chain)}" for k, chain in pairs]
    Path(path).write_text(MANIFEST_HEADER + "\n".join(lines) + "\n")


@functools.lru_cache(maxsize=1)
def chain_schedule() -> tuple[tuple[dict[str, Any], tuple[str, ...]], ...]:
    """The official 1000 (initial condition, five subtasks) pairs in evaluation order,
    read from the manifest shipped in ``workbench/data`` (written by
    :func:`draw_schedule`, checked equal to CALVIN's ``get_sequences(1000)``).

    >>> schedule = chain_schedule()
    >>> len(schedule), schedule[0][1][:2]
    (1000, ('rotate_blue_block_right', 'move_slider_right'))
    """
    conditions = initial_conditions()
    out = []
    for line in MANIFEST.read_text().splitlines():
        if line and not line.startswith("#"):
            index, *chain = line.split()
            out.append((conditions[int(index)], tuple(chain)))
    return tuple(out)


def fnv1_32(text: str) -> int:
    """The 32-bit FNV-1 hash as CALVIN's evaluation computes it with ``pyhash.fnv1_32``:
    multiply-then-xor over the text's UTF-16-LE bytes, starting from 0 (pyhash's
    default seed, not FNV's offset basis).

    >>> fnv1_32("test")  # pyhash's own test value
    3910690890
    """
    value = 0
    for byte in text.encode("utf-16-le"):
        value = (value * 0x01000193) & 0xFFFFFFFF
        value ^= byte
    return value


def scene_for_condition(condition: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(robot_obs (15,), scene_obs (24,))`` that put calvin_env in ``condition``: the
    neutral robot, fixtures and lights set, blocks placed and turned by a generator
    seeded with :func:`fnv1_32` of ``str(condition.values())`` (the official rule)."""
    rng = np.random.RandomState(fnv1_32(str(condition.values())))
    table = [np.array(p) for p in _TABLE]
    rng.shuffle(table)
    scene = np.zeros(24)
    scene[0] = 0.28 if condition["slider"] == "left" else 0.0
    scene[1] = 0.22 if condition["drawer"] == "open" else 0.0
    scene[3] = 0.088 if condition["lightbulb"] == 1 else 0.0
    scene[4], scene[5] = condition["lightbulb"], condition["led"]
    slider = {"slider_right": _SLIDER_RIGHT, "slider_left": _SLIDER_LEFT}
    # the table spot each block takes when on the table (blue's depends on red's place)
    spots = {"red_block": table[0],
             "blue_block": table[1] if condition["red_block"] == "table" else table[0],
             "pink_block": table[1]}
    for offset, block in ((6, "red_block"), (12, "blue_block"), (18, "pink_block")):
        place = condition[block]
        scene[offset:offset + 3] = slider[place] if place in slider else spots[block]
        scene[offset + 5] = rng.uniform(*_YAW_RANGE)
    return NEUTRAL_ROBOT.copy(), scene


@dataclass(frozen=True)
class ChainProgress:
    """Where an episode is in its chain: the current subtask's index, controls spent on
    it, subtasks solved in a row, and whether a subtask ran out of controls."""

    subtask: int = 0
    steps: int = 0
    completed: int = 0
    failed: bool = False

    @property
    def finished(self) -> bool:
        return self.failed or self.completed == CHAIN_LENGTH


def advance_chain(progress: ChainProgress, solved: bool,
                  subtask_steps: int = SUBTASK_STEPS) -> ChainProgress:
    """The progress after one control in which the current subtask was (or was not)
    solved: a solved subtask moves on to the next; one unsolved after
    ``subtask_steps`` controls ends the chain.

    >>> p = advance_chain(ChainProgress(), solved=True)
    >>> p.subtask, p.completed, p.finished
    (1, 1, False)
    >>> advance_chain(ChainProgress(steps=359), solved=False).failed
    True
    """
    if progress.finished:
        raise ValueError("the chain is already finished")
    if solved:
        return ChainProgress(progress.subtask + 1, 0, progress.completed + 1)
    steps = progress.steps + 1
    return replace(progress, steps=steps, failed=steps >= subtask_steps)


def chain_length(solved: Iterable[bool]) -> int:
    """How many subtasks in a row were solved from the first.

    >>> chain_length([True, True, False, True, True])
    2
    """
    count = 0
    for ok in solved:
        if not ok:
            break
        count += 1
    return count


def chain_success_rates(lengths: Sequence[int]) -> np.ndarray:
    """(5,) float array: rates[k] = fraction of chains with at least k+1 subtasks solved
    in a row (CALVIN's "tasks completed in a row" table).

    >>> chain_success_rates([5, 0, 2, 1]).tolist()
    [0.75, 0.5, 0.25, 0.25, 0.25]
    """
    lengths = np.asarray(lengths, int)
    if lengths.size == 0:
        raise ValueError("no chains")
    return np.array([(lengths >= k).mean() for k in range(1, CHAIN_LENGTH + 1)])


def average_chain_length(lengths: Sequence[int]) -> float:
    """CALVIN's headline score: the mean number of subtasks solved in a row (0 to 5).

    >>> average_chain_length([5, 0, 2, 1])
    2.0
    """
    return float(chain_success_rates(lengths).sum())


def calvin_action(action: np.ndarray) -> np.ndarray:
    """The 7-D canonical action as calvin_env takes a relative action: float64, the
    gripper binarised (> 0: +1 opens, otherwise -1 closes).

    >>> calvin_action(np.array([0.1, 0, 0, 0, 0, 0.2, 0.0], np.float32))[[0, 6]].tolist()
    [0.10000000149011612, -1.0]
    """
    command = np.asarray(action, np.float64).copy()
    if command.shape != (7,):
        raise ValueError(f"CALVIN takes a 7-D relative action; got shape {command.shape}")
    command[6] = 1.0 if command[6] > 0 else -1.0
    return command


def calvin_state(robot_obs: np.ndarray) -> np.ndarray:
    """calvin_env's ``robot_obs`` as the 15-D float32 ``state``."""
    state = np.asarray(robot_obs, np.float32).reshape(-1)
    if state.shape != (15,):
        raise ValueError(f"CALVIN robot_obs has 15 values; got {state.shape}")
    return state


def dataset_root(dataset_dir: str | os.PathLike | None = None) -> Path | None:
    """The folder holding CALVIN's splits: ``dataset_dir``, else ``$CALVIN_DATASET``."""
    value = dataset_dir or os.environ.get(DATASET_VARIABLE)
    return Path(value) if value else None


def missing(suite: str | None = None, dataset_dir: str | os.PathLike | None = None) -> list[str]:
    """What CALVIN lacks here (empty when it can run): packages, calvin_env's task
    config, the split's environment config. ``suite=None``: any split will do."""
    reasons = missing_packages(PACKAGES)
    spec = importlib.util.find_spec("calvin_env")
    if spec is not None and spec.origin:
        config = Path(spec.origin).parents[1] / TASK_CONFIG
        if not config.exists():
            reasons.append(f"missing assets: {config} (install calvin_env editable from "
                           "its repository, which holds conf/)")
    root = dataset_root(dataset_dir)
    splits = [suite] if suite else list(SUITES)
    if root is None:
        reasons.append(f"missing assets: no CALVIN dataset; set ${DATASET_VARIABLE} (or "
                       f"dataset_dir=) to the folder holding the splits {', '.join(SUITES)} "
                       "(CALVIN's dataset/download_data.sh D | ABC | ABCD)")
    elif not any((root / s / ENV_CONFIG).exists() for s in splits):
        reasons.append(f"missing assets: {root / splits[0] / ENV_CONFIG} does not exist "
                       f"(download the split with CALVIN's dataset/download_data.sh)")
    return reasons


class CalvinAdapter(SuiteTable, BenchmarkAdapter):
    """Runs CALVIN chains; keeps one calvin_env environment for its life."""

    name = "calvin"
    initial_states = NUM_CHAINS  # the official 1000 chains
    suites = {suite: (TASK,) for suite in SUITES}
    suite_label = "CALVIN"
    max_steps = CHAIN_LENGTH * SUBTASK_STEPS
    protocol = get_protocol("calvin-v1")
    preload = ("pybullet", "calvin_env", "workbench.benchmarks.calvin")

    def __init__(self, suite: str = "task_ABC_D", seed: int = 0, image_size: int = 200,
                 dataset_dir: str | None = None) -> None:
        """image_size: both cameras' square resolution; dataset_dir: the folder holding
        the splits (default ``$CALVIN_DATASET``)."""
        self._tasks = self.suite_tasks(suite)
        self.suite, self.seed, self.image_size = suite, seed, image_size
        self.dataset_dir = dataset_dir
        self._env: Any = None
        self._oracle: Any = None
        self._chain: tuple[str, ...] = ()
        self._progress = ChainProgress()
        self._start_info: Any = None

    @classmethod
    def readiness(cls) -> str:
        return readiness_text(missing())

    @property
    def completed(self) -> int:
        """Subtasks of the current chain solved in a row so far."""
        return self._progress.completed

    def instruction(self, task: str) -> str:
        """A subtask's instruction; for the chain task, its current subtask's."""
        if task in INSTRUCTIONS:
            return INSTRUCTIONS[task]
        if task != TASK:
            raise ValueError(f"unknown CALVIN task {task!r}; tasks: [{TASK!r}] or a subtask")
        return INSTRUCTIONS[self._current()] if self._chain else "solve five subtasks in a row"

    def _current(self) -> str:
        return self._chain[min(self._progress.subtask, CHAIN_LENGTH - 1)]

    def _environment(self) -> Any:
        if self._env is None:
            refuse("CALVIN", missing(self.suite, self.dataset_dir))
            import calvin_env
            import hydra
            from omegaconf import OmegaConf

            config = OmegaConf.load(dataset_root(self.dataset_dir) / self.suite / ENV_CONFIG)
            for camera in CAMERAS.values():
                config.cameras[camera].width = config.cameras[camera].height = self.image_size
            self._env = hydra.utils.instantiate(config.env, show_gui=False, use_vr=False,
                                                use_scene_info=True)
            tasks = OmegaConf.load(Path(calvin_env.__file__).parents[1] / TASK_CONFIG)
            self._oracle = hydra.utils.instantiate(tasks)
        return self._env

    def reset(self, episode: EpisodeSpec) -> None:
        if episode.task not in self._tasks:
            raise ValueError(f"task {episode.task!r} is not in suite {self.suite!r}")
        schedule = chain_schedule()
        if not 0 <= episode.init_state_id < len(schedule):
            raise ValueError(f"init_state_id {episode.init_state_id} out of range "
                             f"[0, {len(schedule)}) for CALVIN's chains")
        env = self._environment()
        condition, self._chain = schedule[episode.init_state_id]
        robot_obs, scene_obs = scene_for_condition(condition)
        env.reset(robot_obs=robot_obs, scene_obs=scene_obs)
        self._progress, self._start_info = ChainProgress(), env.get_info()

    def step(self, action: np.ndarray) -> StepResult:
        if self._env is None or not self._chain:
            raise RuntimeError("CalvinAdapter.step() before reset()")
        subtask = self._current()
        info = self._advance(calvin_action(action))
        solved = bool(self._oracle.get_task_info_for_set(self._start_info, info, {subtask}))
        self._progress = advance_chain(self._progress, solved)
        if solved:
            self._start_info = self._env.get_info()
        done = self._progress.finished
        return StepResult(float(solved), self._progress.completed == CHAIN_LENGTH, done,
                          {"subtask": subtask, "completed": self._progress.completed})

    def _advance(self, command: np.ndarray) -> dict[str, Any]:
        """calvin_env's ``step`` (not in VR) without the camera render its ``get_obs``
        does at the end: apply the action, run the physics ``action_repeat`` times, step
        the scene; returns ``get_info()``, which the task oracle reads."""
        env = self._env
        env.robot.apply_action(command)
        for _ in range(env.action_repeat):
            env.p.stepSimulation(physicsClientId=env.cid)
        env.scene.step()
        return env.get_info()

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._env is None or not self._chain:
            raise RuntimeError("CalvinAdapter.observe() before reset()")
        out: dict[str, Any] = {}
        for name in features:
            if name in CAMERAS:
                out[name] = self.render(name)
            elif name == "state":
                out[name] = self.trajectory_state()
            elif name == "privileged.state":
                out[name] = np.asarray(self._env.get_state_obs()["scene_obs"], np.float32)
            elif name == "instruction":
                out[name] = INSTRUCTIONS[self._current()]
            else:
                self.protocol.feature(name)  # raises naming the declared features
        return out

    def render(self, feature: str = "images.static") -> np.ndarray:
        """One camera frame (image_size, image_size, 3) uint8, rendered now."""
        camera = next(c for c in self._env.cameras if c.name == CAMERAS[feature])
        rgb, _ = camera.render()
        return np.ascontiguousarray(rgb[:, :, :3], np.uint8)

    def trajectory_state(self) -> np.ndarray:
        return calvin_state(self._env.get_state_obs()["robot_obs"])

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
        self._env, self._oracle, self._chain = None, None, ()
