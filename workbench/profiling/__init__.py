"""Profilers: small functions that return tables of where evaluation time goes.

- :mod:`~workbench.profiling.sim`: the simulator's stages from MuJoCo's own timers
  and wall clocks (:func:`profile_sim_stages`), an observer of the runtime's step loop;
- :mod:`~workbench.profiling.policy`: a vision policy's stages, wall and kernel time
  (:func:`profile_policy_stages`);
- :func:`plot_stage_profile`.

- CPU, memory and GPU monitors (:class:`ResourceMonitor`, :func:`cpu_usage`,
  :func:`gpu_busy`, :func:`gpu_status`, :func:`memory_held`), defined in
  :mod:`workbench.runtime.resources` because the pools sample them while they run
  (the runtime sits below the profilers), and offered here beside the profilers.

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
    OBSERVE,
    SIM_STAGES,
    SimStageTimer,
    StageTotals,
    compare_observe_schedules,
    mujoco_timers,
    mujoco_timing,
    profile_sim_stages,
    sim_stage_table,
    stage_frame,
)
from workbench.runtime.resources import (
    ResourceMonitor,
    ResourceUsage,
    cpu_usage,
    gpu_busy,
    gpu_status,
    memory_held,
)

__all__ = [
    "OBSERVE", "POLICY_STAGES", "ResourceMonitor", "ResourceUsage", "SIM_STAGES",
    "SimStageTimer", "StageClock", "StageTotals", "compare_observe_schedules", "cpu_usage",
    "gpu_busy", "gpu_status", "memory_held", "mujoco_timers", "mujoco_timing", "plot_stage_profile",
    "policy_stage_table", "profile_policy_batches", "profile_policy_stages",
    "profile_sim_stages", "sim_stage_table", "stage_frame", "staged_forward",
    "synthetic_observations",
]
