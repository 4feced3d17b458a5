"""Studies behind the notebooks, each through the runner or the runtime's step loop
(none steps an environment on its own):

- runtime experiments: pool sweep, variant ladder, outcome agreement across runtime
  variants, the search table, hand-made probes (:mod:`.runtime`, plots in :mod:`.plots`);
  scaling against episodes, workers and replicas (:mod:`.scaling`), Ray over two hosts
  in network namespaces (:mod:`.ray_hosts`);
- ranking studies: the graded policies' own rollouts ranked by a judge
  (:mod:`.own_rollouts`), judge validation on held-out candidates
  (:mod:`.judge_validation`, candidates trained by :mod:`.candidates` and
  :mod:`.training`), judging recorded rollouts into the records (:mod:`.judging`), the
  paper's published numbers (:mod:`.paper_data`), videos for human annotation
  (:mod:`.annotation_videos`); their plots in :mod:`.ranking_plots`;
- action replay (R2S-Eval Table I in kind): the "real" world (:mod:`.reality_gap`),
  the experiment (:mod:`.action_replay`) and its table (:mod:`.action_replay_table`), replaying a
  recorded rollout's actions to render its frames (:mod:`.frame_replay`).

Names load on first use, as in :mod:`workbench`.
"""

from workbench._lazy import lazy_exports

_EXPORTS = {
    "GapMetaWorldAdapter": "workbench.studies.reality_gap",
    "ProbeSession": "workbench.studies.runtime",
    "RealityGap": "workbench.studies.reality_gap",
    "ReplayConfig": "workbench.studies.action_replay",
    "automatic_replay": "workbench.studies.action_replay",
    "draw_rankings": "workbench.studies.judge_validation",
    "judge_comparisons": "workbench.studies.judging",
    "judge_episode_pairs": "workbench.studies.judge_validation",
    "outcome_agreement_table": "workbench.studies.runtime",
    "paired_difference": "workbench.studies.judge_validation",
    "plot_ladder": "workbench.studies.plots",
    "plot_outcome_agreement": "workbench.studies.plots",
    "plot_probe_history": "workbench.studies.plots",
    "plot_probes": "workbench.studies.plots",
    "plot_sweep": "workbench.studies.plots",
    "pool_configs": "workbench.studies.runtime",
    "ray_ladder": "workbench.studies.runtime",
    "replay_frames": "workbench.studies.frame_replay",
    "run_row": "workbench.studies.runtime",
    "scaling_table": "workbench.studies.scaling",
    "runtime_ladder": "workbench.studies.runtime",
    "search_table": "workbench.studies.runtime",
    "summarize_validation": "workbench.studies.judge_validation",
    "sweep_pool": "workbench.studies.runtime",
    "table_one": "workbench.studies.action_replay_table",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
