"""Studies behind the notebooks: runtime experiments (pool sweep, variant ladder,
outcome agreement, search table, hand-made probes), their plots, and behaviour
cloning of the vision policy. Each goes through the runner or the runtime's step
loop; none steps an environment on its own."""

from workbench.studies.plots import (plot_agreement, plot_ladder, plot_probe_history,
                                     plot_probes, plot_sweep)
from workbench.studies.runtime import (ProbeSession, agreement_table, pool_configs,
                                       ray_ladder, run_row, runtime_ladder, search_table,
                                       sweep_pool)

__all__ = ["ProbeSession", "agreement_table", "plot_agreement", "plot_ladder",
           "plot_probe_history", "plot_probes", "plot_sweep", "pool_configs", "ray_ladder", "run_row",
           "runtime_ladder", "search_table", "sweep_pool"]
