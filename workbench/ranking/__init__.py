"""Ranking policies from pairwise preferences, after R2S-Eval.

Bradley-Terry fits (MM) and bootstrap intervals, validation metrics (Spearman, Pearson,
MMRV, ...), pair sampling with nested checkpoints, adaptive allocation of judge calls,
judges (VLM, human, offline heuristic) in :mod:`workbench.ranking.judges`, and the
paper's published numbers in :mod:`workbench.ranking.paper_data`.

>>> from workbench.ranking import fit_bradley_terry, mmrv
>>> fit_bradley_terry([[0, 2], [2, 0]]).scores.tolist()
[50.0, 50.0]
"""

from workbench.ranking.adaptive import (AdaptiveResult, adaptive_comparisons, bt_oracle,
                                        plan_batch, score_covariance, uniform_comparisons)
from workbench.ranking.bootstrap import BootstrapResult, bootstrap_bradley_terry, resample_wins
from workbench.ranking.bradley_terry import (BTResult, ConvergenceWarning,
                                             DisconnectedComparisonsWarning, fit_bradley_terry,
                                             fit_bradley_terry_batch, validate_wins)
from workbench.ranking.collect import judge_comparisons
from workbench.ranking.metrics import (agreement_rate, mean_interval_width, mmrv,
                                       order_swap_consistency, pearson_r, spearman_rho,
                                       success_rates, wilson_interval, win_rate_matrix)
from workbench.ranking.synthetic import synthetic_rollout
from workbench.ranking.sampling import (RolloutIndex, checkpoints, convergence_curve,
                                        demo_rollout_table, sample_comparisons,
                                        wins_from_preferences)

__all__ = [
    "AdaptiveResult",
    "BTResult",
    "BootstrapResult",
    "ConvergenceWarning",
    "DisconnectedComparisonsWarning",
    "RolloutIndex",
    "adaptive_comparisons",
    "agreement_rate",
    "bootstrap_bradley_terry",
    "bt_oracle",
    "checkpoints",
    "convergence_curve",
    "demo_rollout_table",
    "fit_bradley_terry",
    "fit_bradley_terry_batch",
    "judge_comparisons",
    "mean_interval_width",
    "mmrv",
    "order_swap_consistency",
    "pearson_r",
    "plan_batch",
    "resample_wins",
    "sample_comparisons",
    "score_covariance",
    "spearman_rho",
    "success_rates",
    "synthetic_rollout",
    "uniform_comparisons",
    "validate_wins",
    "wilson_interval",
    "win_rate_matrix",
    "wins_from_preferences",
]
