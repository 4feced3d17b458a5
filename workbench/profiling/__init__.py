"""Profilers: small functions that return tables of where evaluation time goes.

- :mod:`~workbench.profiling.sim`: the simulator's stages from MuJoCo's own timers
  and wall clocks (:func:`profile_sim_stages`);
- :mod:`~workbench.profiling.policy`: a vision policy's stages, wall and kernel time
  (:func:`profile_policy_stages`);
- :mod:`~workbench.profiling.system`: GPU utilization (NVML), CPU cores busy and peak
  memory of a process tree (:func:`gpu_busy`, :class:`ResourceMonitor`);
- :func:`plot_stage_profile`.

MuJoCo and torch are imported only when a profiler runs.
"""

from workbench.profiling.plots import plot_stage_profile
from workbench.profiling.policy import (
    POLICY_STAGES,
    StageClock,
    policy_stage_table,
    profile_policy_batches,
    profile_policy_stages,
    staged_forward,
    synthetic_observations,
)
from workbench.profiling.sim import (
    SIM_STAGES,
    StageTotals,
    compare_render_schedules,
    mujoco_timers,
    mujoco_timing,
    profile_sim_stages,
    sim_stage_table,
    stage_frame,
)
from workbench.profiling.system import (
    GpuSample,
    ResourceMonitor,
    ResourceUsage,
    cpu_usage,
    gpu_busy,
    gpu_status,
)

__all__ = [
    "POLICY_STAGES", "SIM_STAGES", "GpuSample", "ResourceMonitor", "ResourceUsage",
    "StageClock", "StageTotals", "compare_render_schedules", "cpu_usage", "gpu_busy",
    "gpu_status", "mujoco_timers", "mujoco_timing", "plot_stage_profile", "policy_stage_table",
    "profile_policy_batches", "profile_policy_stages", "profile_sim_stages", "sim_stage_table",
    "stage_frame", "staged_forward", "synthetic_observations",
]
