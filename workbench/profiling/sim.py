"""Where simulator time goes, split into the stages of a simulated evaluation.

:func:`profile_sim_stages` runs episodes with a policy through the runtime's one step
loop (:func:`~workbench.runtime.episode.run_episode`), watched by a
:class:`SimStageTimer`, on any adapter whose ``mujoco_data()`` is MuJoCo's ``MjData``
(as :class:`~workbench.benchmarks.metaworld.MetaWorldAdapter`'s is). It splits the
simulator's time into five stages:

- "Robot control and forward kinematics": MuJoCo's ``mj_forward`` minus its
  constraint solve (``mjTIMER_FORWARD - mjTIMER_CONSTRAINT``: position, velocity,
  actuation, acceleration, collision), for every ``mj_forward``, the one inside
  each ``mj_step`` and the one MetaWorld calls after its ``frame_skip`` sub-steps;
- "Physics integration": the constraint solve and the integrator
  (``mjTIMER_CONSTRAINT + mjTIMER_ADVANCE``);
- "Observable updates and step bookkeeping": wall time of ``adapter.step`` minus the
  two above (Python control code, reward, observation vector, MuJoCo's per-step
  checks) plus reading the non-camera features;
- "Rendering": wall time of the camera renders;
- "Episode reset": wall time of ``adapter.reset``.

MuJoCo only measures durations when a timer callback is set (``data.timer[i].number``
always counts, ``.duration`` stays 0 otherwise); :func:`mujoco_timing` sets
``time.perf_counter`` for the duration of a profile, which adds about 5% to MuJoCo's
own time. Policy inference is excluded (see :mod:`workbench.profiling.policy`).

``observe`` sets when observations (and so cameras) are read: ``"every_step"`` whether
the policy reads them or not (the official-like loop), ``"chunk_boundary"`` only when
the policy is about to act.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from workbench.benchmarks.base import BenchmarkAdapter, StepResult
from workbench.contracts.plan import EpisodeSpec
from workbench.runtime.episode import CAMERA_PREFIX, EpisodeObserver, run_episode
from workbench.runtime.episode import warm_up as build_contexts

SIM_STAGES = ("Robot control and forward kinematics", "Physics integration",
              "Observable updates and step bookkeeping", "Rendering", "Episode reset")
OBSERVE = ("every_step", "chunk_boundary")
STAGE_COLUMNS = ["stage", "total_s", "per_step_ms", "share", "calls", "calls_per_step",
                 "observe", "chunk_size", "steps", "episodes"]


@dataclass
class StageTotals:
    """Accumulated seconds and call counts of one profile (see the module docstring)."""

    control_s: float = 0.0
    physics_s: float = 0.0
    bookkeeping_s: float = 0.0
    render_s: float = 0.0
    reset_s: float = 0.0
    policy_s: float = 0.0
    forward_calls: int = 0
    advance_calls: int = 0
    steps: int = 0
    renders: int = 0
    resets: int = 0


@contextlib.contextmanager
def mujoco_timing() -> Iterator[None]:
    """Have MuJoCo fill ``data.timer[*].duration`` (perf_counter seconds) inside the block.

    >>> import mujoco
    >>> with mujoco_timing():
    ...     mujoco.get_mjcb_time() is not None
    True
    """
    import mujoco

    previous = mujoco.get_mjcb_time()
    if previous is None:
        mujoco.set_mjcb_time(time.perf_counter)
    try:
        yield
    finally:
        if previous is None:
            mujoco.set_mjcb_time(None)


def mujoco_timers(data: Any) -> pd.DataFrame:
    """All of MuJoCo's timers of an ``MjData``: columns timer, duration_s, number.

    >>> import mujoco
    >>> model = mujoco.MjModel.from_xml_string("<mujoco/>")
    >>> data = mujoco.MjData(model)
    >>> mujoco.mj_step(model, data)
    >>> int(mujoco_timers(data).set_index("timer").loc["STEP", "number"])
    1
    """
    import mujoco

    names = sorted((n for n in dir(mujoco.mjtTimer) if n.startswith("mjTIMER_")),
                   key=lambda n: int(getattr(mujoco.mjtTimer, n)))
    rows = [(n[len("mjTIMER_"):], float(data.timer[getattr(mujoco.mjtTimer, n)].duration),
             int(data.timer[getattr(mujoco.mjtTimer, n)].number)) for n in names]
    return pd.DataFrame(rows, columns=["timer", "duration_s", "number"])


def _timer_snapshot(data: Any) -> tuple[float, float, float, int, int, float]:
    """(forward s, constraint s, advance s, forward calls, advance calls, step s) so far."""
    import mujoco

    fwd = data.timer[mujoco.mjtTimer.mjTIMER_FORWARD]
    adv = data.timer[mujoco.mjtTimer.mjTIMER_ADVANCE]
    con = data.timer[mujoco.mjtTimer.mjTIMER_CONSTRAINT]
    step = data.timer[mujoco.mjtTimer.mjTIMER_STEP]
    return fwd.duration, con.duration, adv.duration, fwd.number, adv.number, step.duration


class SimStageTimer(EpisodeObserver):
    """Accumulates the five stages (see the module docstring) of every episode it sees."""

    def __init__(self) -> None:
        self.totals = StageTotals()
        self._before: tuple[float, float, float, int, int] | None = None

    def on_reset(self, adapter: BenchmarkAdapter, spec: EpisodeSpec, seconds: float) -> None:
        if adapter.mujoco_data() is None:
            raise ValueError(f"profile_sim_stages needs a MuJoCo adapter; {adapter.name}'s "
                             "mujoco_data() is None")
        self.totals.reset_s += seconds
        self.totals.resets += 1

    def on_observe(self, adapter: BenchmarkAdapter, step: int, observation: dict[str, Any],
                   render_s: float, read_s: float) -> None:
        self.totals.render_s += render_s
        self.totals.renders += sum(k.startswith(CAMERA_PREFIX) for k in observation)
        self.totals.bookkeeping_s += read_s

    def on_act(self, step: int, observation: dict[str, Any], actions: np.ndarray,
               seconds: float) -> None:
        self.totals.policy_s += seconds

    def before_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray) -> None:
        self._before = _timer_snapshot(adapter.mujoco_data())

    def after_step(self, adapter: BenchmarkAdapter, step: int, action: np.ndarray,
                   result: StepResult, seconds: float) -> None:
        after = _timer_snapshot(adapter.mujoco_data())
        fwd, con, adv, n_fwd, n_adv, step_s = (a - b for a, b in zip(after, self._before))
        if n_fwd == 0 and n_adv > 0:
            # stepped as mj_step1 + mj_step2 (robosuite, LIBERO): no forward timer; the
            # forward pass is what the step took besides integration
            fwd = max(step_s - adv, con)
        totals = self.totals
        totals.control_s += fwd - con
        totals.physics_s += con + adv
        totals.bookkeeping_s += seconds - fwd - adv
        totals.forward_calls += n_fwd
        totals.advance_calls += n_adv
        totals.steps += 1


def stage_frame(totals: StageTotals, observe: str, chunk_size: int,
                episodes: int) -> pd.DataFrame:
    """The five-stage table (columns ``STAGE_COLUMNS``) from accumulated totals.

    >>> t = StageTotals(control_s=1, physics_s=1, bookkeeping_s=1, render_s=1, reset_s=0,
    ...                 steps=10, renders=10, resets=1, forward_calls=60, advance_calls=50)
    >>> stage_frame(t, "every_step", chunk_size=8, episodes=1)["share"].tolist()
    [0.25, 0.25, 0.25, 0.25, 0.0]
    """
    seconds = [totals.control_s, totals.physics_s, totals.bookkeeping_s, totals.render_s,
               totals.reset_s]
    calls = [totals.forward_calls, totals.advance_calls, totals.steps, totals.renders,
             totals.resets]
    total, steps = sum(seconds), max(totals.steps, 1)
    rows = [(stage, s, 1e3 * s / steps, s / total if total > 0 else np.nan, c, c / steps,
             observe, chunk_size, totals.steps, episodes)
            for stage, s, c in zip(SIM_STAGES, seconds, calls)]
    return pd.DataFrame(rows, columns=STAGE_COLUMNS)


def profile_sim_stages(adapter: BenchmarkAdapter, episodes: Sequence[EpisodeSpec], policy: Any,
                       observe: str = "chunk_boundary", max_steps: int | None = None,
                       warm_up: bool = True) -> pd.DataFrame:
    """Run ``episodes`` with a loaded ``policy`` and time the simulator's stages.

    observe: ``"every_step"`` or ``"chunk_boundary"`` (see the module docstring).
    max_steps caps each episode (None or 0: only the adapter's own ``max_steps``).
    warm_up builds each task's environment and renderer before the clock starts.

    Returns one row per stage in ``SIM_STAGES``: total_s, per_step_ms, share (of the
    five stages' sum), calls (mj_forward calls, integrator steps, env steps, camera
    frames, resets), calls_per_step, and the settings. ``df.attrs["policy_s"]`` holds
    the excluded policy time.

    >>> from workbench.benchmarks import make_benchmark
    >>> from workbench.contracts import LoadContext, plan_episodes
    >>> from workbench.policies import make_policy
    >>> adapter = make_benchmark("metaworld", suite="MT1:reach-v3", image_size=32)
    >>> policy = make_policy("expert")
    >>> _ = policy.load(LoadContext("metaworld-v1"))
    >>> df = profile_sim_stages(adapter, plan_episodes("metaworld", "MT1:reach-v3",
    ...                         ["reach-v3"], 1), policy, max_steps=5)
    >>> int(df["steps"].iloc[0]), round(float(df["share"].sum()), 6)
    (5, 1.0)
    >>> adapter.close()
    """
    if not episodes:
        raise ValueError("profile_sim_stages needs at least one episode")
    if observe not in OBSERVE:
        raise ValueError(f"observe: expected one of {list(OBSERVE)}; got {observe!r}")
    timer = SimStageTimer()
    with mujoco_timing():
        if warm_up:
            build_contexts(adapter, episodes, policy.capabilities.features)
        for spec in episodes:
            result = run_episode(adapter, policy, spec, observe == "every_step", [timer],
                                 max_steps or None)
            if result.error_kind is not None:
                raise RuntimeError(f"{spec.episode_id} failed while profiling: "
                                   f"{result.error_message}")
    frame = stage_frame(timer.totals, observe, policy.capabilities.chunk_size, len(episodes))
    frame.attrs["policy_s"] = timer.totals.policy_s
    return frame


def compare_observe_schedules(adapter: BenchmarkAdapter, episodes: Sequence[EpisodeSpec],
                              policy: Any, schedules: Sequence[str] = OBSERVE,
                              **options: Any) -> pd.DataFrame:
    """:func:`profile_sim_stages` once per observation schedule, stacked (long format)."""
    return pd.concat([profile_sim_stages(adapter, episodes, policy, observe=observe,
                                         **options) for observe in schedules],
                     ignore_index=True)


def sim_stage_table(profiles: pd.DataFrame, value: str = "total_s",
                    by: str = "observe") -> pd.DataFrame:
    """Stages (paper order) by ``by`` settings, one ``value`` per cell, plus a total row.

    >>> t = StageTotals(control_s=2, physics_s=1, steps=4)
    >>> sim_stage_table(stage_frame(t, "every_step", 8, 1)).loc["Simulator total"].tolist()
    [3.0]
    """
    table = profiles.pivot_table(index="stage", columns=by, values=value, aggfunc="sum")
    table = table.reindex([s for s in SIM_STAGES if s in table.index])
    table.loc["Simulator total"] = table.sum()
    table.columns = [f"{by}={c}" for c in table.columns]
    return table
