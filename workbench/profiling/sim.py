"""Where simulator time goes, split into the stages of a simulated evaluation.

:func:`profile_sim_stages` runs episodes with a policy (in this process, on an
adapter whose ``_env`` holds MuJoCo ``model``/``data``, as
:class:`~workbench.benchmarks.metaworld.MetaWorldAdapter` does) and splits the
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

``render_every`` sets how often cameras are rendered: 1 renders every step whether
the policy reads it or not (the official-like loop); ``chunk_size`` renders only at
action-chunk boundaries, when the policy reads. The policy always gets a fresh
observation when it reads.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from workbench.plan import EpisodeSpec

SIM_STAGES = ("Robot control and forward kinematics", "Physics integration",
              "Observable updates and step bookkeeping", "Rendering", "Episode reset")
CAMERA_PREFIX = "images."
STAGE_COLUMNS = ["stage", "total_s", "per_step_ms", "share", "calls", "calls_per_step",
                 "render_every", "chunk_size", "steps", "episodes"]


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


def _timer_snapshot(data: Any) -> tuple[float, float, float, int, int]:
    """(forward s, constraint s, advance s, forward calls, advance calls) so far."""
    import mujoco

    fwd = data.timer[mujoco.mjtTimer.mjTIMER_FORWARD]
    adv = data.timer[mujoco.mjtTimer.mjTIMER_ADVANCE]
    con = data.timer[mujoco.mjtTimer.mjTIMER_CONSTRAINT]
    return fwd.duration, con.duration, adv.duration, fwd.number, adv.number


def _timed_step(adapter: Any, data: Any, action: np.ndarray, totals: StageTotals) -> Any:
    before = _timer_snapshot(data)
    start = time.perf_counter()
    result = adapter.step(action)
    wall = time.perf_counter() - start
    fwd, con, adv, n_fwd, n_adv = (a - b for a, b in zip(_timer_snapshot(data), before))
    totals.control_s += fwd - con
    totals.physics_s += con + adv
    totals.bookkeeping_s += wall - fwd - adv
    totals.forward_calls += n_fwd
    totals.advance_calls += n_adv
    totals.steps += 1
    return result


def _observe(adapter: Any, features: Sequence[str], totals: StageTotals) -> dict[str, Any]:
    """Render the camera features (timed as Rendering) and read the rest (bookkeeping)."""
    obs: dict[str, Any] = {}
    for name in features:
        start = time.perf_counter()
        if name.startswith(CAMERA_PREFIX):
            obs[name] = adapter.render(name)
            totals.render_s += time.perf_counter() - start
            totals.renders += 1
        else:
            obs.update(adapter.observe([name]))
            totals.bookkeeping_s += time.perf_counter() - start
    return obs


def _act(policy: Any, obs: dict[str, Any], chunk_size: int, totals: StageTotals) -> list:
    start = time.perf_counter()
    actions = np.asarray(policy.act(obs), dtype=np.float32)
    totals.policy_s += time.perf_counter() - start
    return list(np.atleast_2d(actions)[:chunk_size])


def _profile_episode(adapter: Any, policy: Any, spec: EpisodeSpec, features: Sequence[str],
                     chunk_size: int, render_every: int, max_steps: int,
                     totals: StageTotals) -> None:
    from workbench.runtime.episode import episode_context

    policy.reset(episode_context(adapter, spec))
    try:
        start = time.perf_counter()
        adapter.reset(spec)
        totals.reset_s += time.perf_counter() - start
        totals.resets += 1
        data, queue, obs = adapter._env.data, [], {}
        for step in range(max_steps):
            if step % render_every == 0 or not queue:
                obs = _observe(adapter, features, totals) | {"episode_id": spec.episode_id,
                                                             "step": step}
            if not queue:
                queue = _act(policy, obs, chunk_size, totals)
            if _timed_step(adapter, data, queue.pop(0), totals).done:
                break
    finally:
        policy.end_episode(spec.episode_id)


def _warm_up(adapter: Any, spec: EpisodeSpec, features: Sequence[str]) -> None:
    """Build the task's environment and renderer once, outside the measurement."""
    adapter.reset(spec)
    for name in features:
        if name.startswith(CAMERA_PREFIX):
            adapter.render(name)


def stage_frame(totals: StageTotals, render_every: int, chunk_size: int,
                episodes: int) -> pd.DataFrame:
    """The five-stage table (columns ``STAGE_COLUMNS``) from accumulated totals.

    >>> t = StageTotals(control_s=1, physics_s=1, bookkeeping_s=1, render_s=1, reset_s=0,
    ...                 steps=10, renders=10, resets=1, forward_calls=60, advance_calls=50)
    >>> stage_frame(t, render_every=1, chunk_size=8, episodes=1)["share"].tolist()
    [0.25, 0.25, 0.25, 0.25, 0.0]
    """
    seconds = [totals.control_s, totals.physics_s, totals.bookkeeping_s, totals.render_s,
               totals.reset_s]
    calls = [totals.forward_calls, totals.advance_calls, totals.steps, totals.renders,
             totals.resets]
    total, steps = sum(seconds), max(totals.steps, 1)
    rows = [(stage, s, 1e3 * s / steps, s / total if total > 0 else np.nan, c, c / steps,
             render_every, chunk_size, totals.steps, episodes)
            for stage, s, c in zip(SIM_STAGES, seconds, calls)]
    return pd.DataFrame(rows, columns=STAGE_COLUMNS)


def profile_sim_stages(adapter: Any, episodes: Sequence[EpisodeSpec], policy: Any,
                       features: Sequence[str] | None = None, chunk_size: int | None = None,
                       render_every: int | None = None, max_steps: int | None = None,
                       warm_up: bool = True) -> pd.DataFrame:
    """Run ``episodes`` with a loaded ``policy`` and time the simulator's stages.

    features: what is observed (cameras ``images.*`` are rendered), default the
    policy's features. chunk_size: actions executed per policy call (default the
    policy's). render_every: render cameras every that many steps (default
    ``chunk_size``: at chunk boundaries only). max_steps caps each episode (None or
    0: only the adapter's own ``max_steps``).

    Returns one row per stage in ``SIM_STAGES``: total_s, per_step_ms, share (of the
    five stages' sum), calls (mj_forward calls, integrator steps, env steps, camera
    frames, resets), calls_per_step, and the settings. ``df.attrs["policy_s"]`` holds
    the excluded policy time.

    >>> from workbench.benchmarks.metaworld import MetaWorldAdapter
    >>> from workbench.plan import plan_episodes
    >>> from workbench.policies import LoadContext, make_policy
    >>> adapter = MetaWorldAdapter("MT1:reach-v3", image_size=32)
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
    features = tuple(features or policy.capabilities.features)
    chunk = chunk_size or policy.capabilities.chunk_size
    every = render_every or chunk
    if chunk < 1 or every < 1:
        raise ValueError(f"chunk_size and render_every must be >= 1, got {chunk}, {every}")
    limit = min(max_steps or adapter.max_steps, adapter.max_steps)
    totals = StageTotals()
    with mujoco_timing():
        if warm_up:
            _warm_up(adapter, episodes[0], features)
        for spec in episodes:
            _profile_episode(adapter, policy, spec, features, chunk, every, limit, totals)
    frame = stage_frame(totals, every, chunk, len(episodes))
    frame.attrs["policy_s"] = totals.policy_s
    return frame


def compare_render_schedules(adapter: Any, episodes: Sequence[EpisodeSpec], policy: Any,
                             render_every: Sequence[int] = (1, 8), **options: Any) -> pd.DataFrame:
    """:func:`profile_sim_stages` once per ``render_every`` value, stacked (long format)."""
    return pd.concat([profile_sim_stages(adapter, episodes, policy, render_every=every,
                                         **options) for every in render_every],
                     ignore_index=True)


def sim_stage_table(profiles: pd.DataFrame, value: str = "total_s",
                    by: str = "render_every") -> pd.DataFrame:
    """Stages (paper order) by ``by`` settings, one ``value`` per cell, plus a total row.

    >>> t = StageTotals(control_s=2, physics_s=1, steps=4)
    >>> sim_stage_table(stage_frame(t, 1, 8, 1)).loc["Simulator total"].tolist()
    [3.0]
    """
    table = profiles.pivot_table(index="stage", columns=by, values=value, aggfunc="sum")
    table = table.reindex([s for s in SIM_STAGES if s in table.index])
    table.loc["Simulator total"] = table.sum()
    table.columns = [f"{by}={c}" for c in table.columns]
    return table
