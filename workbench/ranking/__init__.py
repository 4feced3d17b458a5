"""Ranking policies from pairwise preferences, after R2S-Eval.

The statistics core: Bradley-Terry fits (MM) and bootstrap intervals, task-aware
Bradley-Terry (:mod:`.task_bt`), validation metrics (Spearman, Pearson, MMRV, Wilson
intervals, ...), pair sampling with nested checkpoints, adaptive allocation of judge
calls, anytime-valid paired tests that stop when decided (:mod:`.sequential`); the
judges (VLM, human, offline heuristic) in :mod:`workbench.ranking.judges`; human
annotation and agreement (:mod:`.annotation`, :mod:`.agreement`). numpy, pandas, SciPy
and scikit-learn only: no plotting (:mod:`workbench.reports.ranking_plots` draws
rankings), no simulator, no runner. The studies that run rollouts to rank them (own
rollouts, judge validation, action replay, the paper's numbers) are
:mod:`workbench.studies`.

Names load on first use (a module ``__getattr__``): ``import workbench.ranking`` or
``workbench.ranking.bradley_terry`` loads the statistics core only.

>>> from workbench.ranking import fit_bradley_terry, mmrv
>>> fit_bradley_terry([[0, 2], [2, 0]]).scores.tolist()
[50.0, 50.0]
"""

from workbench._lazy import lazy_exports

_EXPORTS = {
    "AdaptiveResult": "workbench.ranking.adaptive",
    "AnnotationSample": "workbench.ranking.annotation",
    "BTResult": "workbench.ranking.bradley_terry",
    "BootstrapResult": "workbench.ranking.bootstrap",
    "ConvergenceWarning": "workbench.ranking.bradley_terry",
    "Decision": "workbench.ranking.sequential",
    "DisconnectedComparisonsWarning": "workbench.ranking.bradley_terry",
    "RolloutIndex": "workbench.ranking.sampling",
    "TaskBTResult": "workbench.ranking.task_bt",
    "adaptive_comparisons": "workbench.ranking.adaptive",
    "agreement_rate": "workbench.ranking.metrics",
    "bootstrap_bradley_terry": "workbench.ranking.bootstrap",
    "bt_oracle": "workbench.ranking.adaptive",
    "checkpoints": "workbench.ranking.sampling",
    "convergence_curve": "workbench.ranking.sampling",
    "decide": "workbench.ranking.sequential",
    "demo_rollout_table": "workbench.ranking.sampling",
    "first_decision": "workbench.ranking.sequential",
    "fit_bradley_terry": "workbench.ranking.bradley_terry",
    "fit_bradley_terry_batch": "workbench.ranking.bradley_terry",
    "fit_task_bradley_terry": "workbench.ranking.task_bt",
    "fixed_size_episodes": "workbench.ranking.sequential",
    "fleiss_kappa": "workbench.ranking.agreement",
    "judge_agreement_table": "workbench.ranking.agreement",
    "load_annotation_files": "workbench.ranking.agreement",
    "majority_votes": "workbench.ranking.agreement",
    "mean_interval_width": "workbench.ranking.metrics",
    "mmrv": "workbench.ranking.metrics",
    "order_swap_consistency": "workbench.ranking.metrics",
    "pearson_r": "workbench.ranking.metrics",
    "plan_batch": "workbench.ranking.adaptive",
    "resample_wins": "workbench.ranking.bootstrap",
    "sample_annotation_pairs": "workbench.ranking.annotation",
    "sample_comparisons": "workbench.ranking.sampling",
    "score_covariance": "workbench.ranking.adaptive",
    "spearman_rho": "workbench.ranking.metrics",
    "success_rates": "workbench.ranking.metrics",
    "synthetic_rollout": "workbench.ranking.synthetic",
    "uniform_comparisons": "workbench.ranking.adaptive",
    "validate_wins": "workbench.ranking.bradley_terry",
    "wilson_interval": "workbench.ranking.metrics",
    "win_rate_matrix": "workbench.ranking.metrics",
    "wins_from_preferences": "workbench.ranking.sampling",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
