"""Offline heuristic judge, not a VLM: the paper's four criteria measured on recorded arrays.

It needs no model and no video. From a rollout's ``.npz`` (see
:mod:`workbench.records.rollout`) it scores, each on 0-1:

1. motion smoothness: jerk of the end-effector path relative to its speed;
2. action continuity: pauses (including a late start) and direction reversals;
3. task success: success flag and time to success (0.9-1), else 0.4 x progress
   (max reward divided by the benchmark's reward scale, ``reward_scale``: 10 for
   MetaWorld v3, whose shaped reward runs 0-10; clipped to 0-1); when both
   rollouts of a pair succeed, the comparison also credits the quicker one
   (``EFFICIENCY_WEIGHT`` x its speed relative to the other), as a viewer comparing
   two videos of the same start would;
4. force / effort control: chatter of the gripper: reversals of the measured
   aperture larger than ``APERTURE_STEP``, beyond two (open and close).

It writes a description in the VLM's format (Section 1..5) and prefers the higher
weighted total (task 0.55, the others 0.15 each, so that a success
usually beats a failure); exact ties go to a seeded, stable coin
over the two rollout ids that does not depend on which is shown as A (so the judge
is order-consistent; identical rollouts, e.g. a graded variant whose defect never
fired, do tie). Its agreement with VLMs or humans is unmeasured: treat its
rankings as a heuristic baseline.

>>> import tempfile, pathlib
>>> from workbench.records.rollout import save_rollout
>>> from workbench.ranking.synthetic import synthetic_rollout
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = save_rollout(synthetic_rollout("smooth", seed=0), d / "a.npz")
>>> _ = save_rollout(synthetic_rollout("jerky", seed=0), d / "b.npz")
>>> judge = OfflineJudge()
>>> judge.compare(RolloutRef("a", str(d / "a.npz")), RolloutRef("b", str(d / "b.npz")), "lift").winner
'A'
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from workbench.ranking.judges.base import JudgeStats, Preference, RolloutRef
from workbench.records.rollout import Rollout, load_rollout

HEURISTIC_LABEL = "offline heuristic judge, not a VLM"
WEIGHTS = {"smoothness": 0.15, "continuity": 0.15, "task": 0.55, "effort": 0.15}
JERK_REF = 0.1  # jerk/speed ratio at which smoothness scores 0.5
MOVING_FRACTION = 0.05  # a step moves when its speed exceeds this share of the top speed
LATE_START = 3  # idle steps before the first motion that count as a hesitation
IDLE_FRACTION = 0.01  # a leading step is idle below this share of the top speed
APERTURE_STEP = 0.01  # aperture change that counts as a gripper movement
EFFICIENCY_WEIGHT = 0.15  # credit for the quicker of two successful rollouts
REWARD_SCALES = {"metaworld": 10.0}  # largest shaped reward per benchmark (progress = reward / scale)


@dataclass(frozen=True)
class RolloutQuality:
    """The measured quantities and the four 0-1 criterion scores of one rollout."""

    jerk_ratio: float
    steps_to_success: int | None
    pauses: int
    reversals: int
    succeeded: bool
    time_to_success: float | None
    progress: float
    gripper_toggles: int
    smoothness: float
    continuity: float
    task: float
    effort: float

    @property
    def total(self) -> float:
        """Weighted sum of the criterion scores (weights in ``WEIGHTS``)."""
        return sum(w * getattr(self, k) for k, w in WEIGHTS.items())


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.sum(x**2, axis=-1)))) if len(x) else 0.0


def _runs(mask: np.ndarray) -> int:
    """Number of maximal runs of True."""
    return int(np.sum(np.diff(np.r_[0, mask.astype(int)]) == 1))


def motion_stats(rollout: Rollout) -> tuple[float, int, int]:
    """(jerk/speed ratio, pauses inside the motion, direction reversals) of the end effector."""
    path = rollout.state[:, :3].astype(np.float64)
    velocity = np.diff(path, axis=0)
    speed = np.linalg.norm(velocity, axis=1)
    if speed.max() <= 0:
        return 0.0, 0, 0
    moving = speed > MOVING_FRACTION * speed.max()
    first, last = np.flatnonzero(moving)[[0, -1]]
    idle_start = int(np.argmax(speed > IDLE_FRACTION * speed.max()))
    pauses = _runs(~moving[first:last + 1]) + int(idle_start >= LATE_START)
    both = moving[1:] & moving[:-1]
    reversals = int(np.sum((np.sum(velocity[1:] * velocity[:-1], axis=1) < 0) & both))
    jerk = np.diff(path, 3, axis=0)
    return _rms(jerk) / max(_rms(velocity), 1e-12), pauses, reversals


def gripper_reversals(aperture: np.ndarray) -> int:
    """Direction changes of the gripper aperture, counting moves over ``APERTURE_STEP``."""
    moves = np.diff(aperture.astype(np.float64))
    signs = np.sign(moves[np.abs(moves) > APERTURE_STEP])
    return int(np.sum(signs[1:] != signs[:-1]))


def assess(rollout: Rollout, reward_scale: float = 1.0) -> RolloutQuality:
    """Measure one rollout on the four criteria (its state columns 0-2 are the
    end-effector position and column 3 the gripper aperture, as MetaWorld records);
    progress is the largest reward over ``reward_scale`` (see :data:`REWARD_SCALES`)."""
    if not reward_scale > 0:
        raise ValueError(f"reward_scale: expected > 0; got {reward_scale!r}")
    if rollout.state.shape[1] < 4:
        raise ValueError(f"the offline judge reads end-effector xyz and gripper aperture "
                         f"(4 state columns); this rollout has {rollout.state.shape[1]}")
    jerk_ratio, pauses, reversals = motion_stats(rollout)
    toggles = gripper_reversals(rollout.state[:, 3])
    first = rollout.first_success
    time_frac = None if first is None else (first + 1) / rollout.steps
    progress = float(np.clip(rollout.reward.max() / reward_scale, 0.0, 1.0))
    task = 1.0 - 0.1 * time_frac if time_frac is not None else 0.4 * progress
    return RolloutQuality(
        jerk_ratio=jerk_ratio, steps_to_success=None if first is None else first + 1,
        pauses=pauses, reversals=reversals,
        succeeded=first is not None, time_to_success=time_frac, progress=progress,
        gripper_toggles=toggles, smoothness=1.0 / (1.0 + jerk_ratio / JERK_REF),
        continuity=1.0 / (1.0 + 0.5 * pauses + 0.25 * reversals), task=task,
        effort=1.0 / (1.0 + 0.5 * max(toggles - 2, 0)))


def _grade(score: float, good: str, fair: str, poor: str) -> str:
    return good if score >= 2 / 3 else fair if score >= 1 / 3 else poor


def outcome_label(q: RolloutQuality) -> str:
    """The paper's outcome label: successful, partially successful or failed."""
    return "successful" if q.succeeded else "partially successful" if q.progress >= 0.5 else "failed"


def describe_quality(q: RolloutQuality) -> str:
    """A Section 1..5 description in the VLM format, labelled as a heuristic."""
    when = f", after {q.steps_to_success} steps" if q.succeeded else ""
    return "\n".join([
        "Section 1: Motion Smoothness",
        _grade(q.smoothness, "Smooth and steady motion", "Mostly smooth with minor jitter",
               "Jerky motion with visible jitter") + f" (jerk/speed ratio {q.jerk_ratio:.3f}).",
        "Section 2: Action Continuity",
        _grade(q.continuity, "Continuous, natural flow", "Some breaks in continuity",
               "Fragmented, with wasted motions")
        + f" ({q.pauses} pauses, {q.reversals} direction reversals).",
        "Section 3: Task Success",
        f"Final outcome: {outcome_label(q)}{when}; progress {q.progress:.2f}.",
        "Section 4: Force / Effort Control",
        _grade(q.effort, "Steady grasp", "Some repeated gripper adjustments",
               "Repeated gripper adjustments (chatter)")
        + f" ({q.gripper_toggles} gripper reversals).",
        "Section 5: Short Overall Summary",
        f"Overall quality score {q.total:.2f} ({HEURISTIC_LABEL}).",
    ])


def pair_totals(qa: RolloutQuality, qb: RolloutQuality) -> tuple[float, float]:
    """Each rollout's total, plus credit for speed relative to the other when both succeed."""
    if qa.steps_to_success is None or qb.steps_to_success is None:
        return qa.total, qb.total
    quickest = min(qa.steps_to_success, qb.steps_to_success)
    return (qa.total + EFFICIENCY_WEIGHT * quickest / qa.steps_to_success,
            qb.total + EFFICIENCY_WEIGHT * quickest / qb.steps_to_success)


class OfflineJudge:
    """Prefers the rollout with the higher heuristic quality total (see the module doc)."""

    description = (f"{HEURISTIC_LABEL}: scores smoothness (jerk), continuity (pauses, "
                   "reversals), task success/progress and gripper chatter from recorded arrays")

    def __init__(self, seed: int = 0, name: str = "offline-heuristic",
                 reward_scale: float = 1.0) -> None:
        """reward_scale: the benchmark's largest reward (``REWARD_SCALES["metaworld"]``
        for MetaWorld), so that progress does not saturate at the first unit of reward."""
        if not reward_scale > 0:
            raise ValueError(f"reward_scale: expected > 0; got {reward_scale!r}")
        self.seed, self.name, self.reward_scale = seed, name, reward_scale
        self.stats = JudgeStats()
        self._cache: dict[str, RolloutQuality] = {}

    def quality(self, ref: RolloutRef) -> RolloutQuality:
        """Assess (once, then cached) the rollout file behind ``ref``."""
        if ref.path is None:
            raise ValueError(f"rollout {ref.rollout_id!r} has no .npz path for the offline judge")
        if ref.path not in self._cache:
            self.stats.describe_calls += 1
            self._cache[ref.path] = assess(load_rollout(ref.path), self.reward_scale)
        else:
            self.stats.cache_hits += 1
        return self._cache[ref.path]

    def _coin(self, x: str, y: str) -> str:
        """The id a seeded coin favours; the same whichever of the two is shown as A,
        so that ties (e.g. identical rollouts) survive the order-swap audit."""
        first, second = sorted((x, y))
        key = f"{self.seed}|{first}|{second}".encode()
        return first if hashlib.sha256(key).digest()[0] % 2 == 0 else second

    def compare(self, a: RolloutRef, b: RolloutRef, task: str) -> Preference:
        """'A' or 'B' by quality total (with the pair's efficiency credit); exact ties by
        a stable seeded coin."""
        qa, qb = self.quality(a), self.quality(b)
        self.stats.compare_calls += 1
        ta, tb = pair_totals(qa, qb)
        if np.isclose(ta, tb, rtol=0, atol=1e-12):
            winner = "A" if self._coin(a.rollout_id, b.rollout_id) == a.rollout_id else "B"
        else:
            winner = "A" if ta > tb else "B"
        return Preference(winner=winner, raw=winner, description_a=describe_quality(qa),
                          description_b=describe_quality(qb))
