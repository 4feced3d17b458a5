"""Ranking policies from pairwise preferences, after R2S-Eval.

Bradley-Terry fits (MM) and bootstrap intervals, validation metrics (Spearman, Pearson,
MMRV, ...), pair sampling with nested checkpoints, adaptive allocation of judge calls,
judges (VLM, human, offline heuristic) in :mod:`workbench.ranking.judges`, and the
paper's published numbers in :mod:`workbench.studies.paper_data`.

Names load on first use (a module ``__getattr__``): ``import workbench.ranking`` or
``workbench.ranking.bradley_terry`` loads the statistics core only, never the runner,
the simulators or Ray.

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
    "DisconnectedComparisonsWarning": "workbench.ranking.bradley_terry",
    "RolloutIndex": "workbench.ranking.sampling",
    "adaptive_comparisons": "workbench.ranking.adaptive",
    "agreement_rate": "workbench.ranking.metrics",
    "bootstrap_bradley_terry": "workbench.ranking.bootstrap",
    "bt_oracle": "workbench.ranking.adaptive",
    "checkpoints": "workbench.ranking.sampling",
    "convergence_curve": "workbench.ranking.sampling",
    "demo_rollout_table": "workbench.ranking.sampling",
    "fit_bradley_terry": "workbench.ranking.bradley_terry",
    "fit_bradley_terry_batch": "workbench.ranking.bradley_terry",
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
