"""Ranking policies from pairwise preferences, after R2S-Eval.

Bradley-Terry fits (MM) and bootstrap intervals, validation metrics (Spearman, Pearson,
MMRV, ...), pair sampling with nested checkpoints, adaptive allocation of judge calls,
judges (VLM, human, offline heuristic) in :mod:`workbench.ranking.judges`, and the
paper's published numbers in :mod:`workbench.ranking.paper_data`.

>>> from workbench.ranking import fit_bradley_terry, mmrv
>>> fit_bradley_terry([[0, 2], [2, 0]]).scores.tolist()
[50.0, 50.0]
"""

from workbench.ranking.action_replay import (GapMetaWorldAdapter, RealityGap, ReplayConfig,
                                             automatic_replay, table_one)
from workbench.ranking.adaptive import (AdaptiveResult, adaptive_comparisons, bt_oracle,
                                        plan_batch, score_covariance, uniform_comparisons)
from workbench.ranking.agreement import (agreement_table, fleiss_kappa, load_annotation_files,
                                         majority_votes)
from workbench.ranking.annotation import AnnotationSample, sample_annotation_pairs
from workbench.ranking.bootstrap import BootstrapResult, bootstrap_bradley_terry, resample_wins
from workbench.ranking.bradley_terry import (BTResult, ConvergenceWarning,
                                             DisconnectedComparisonsWarning, fit_bradley_terry,
                                             fit_bradley_terry_batch, validate_wins)
from workbench.ranking.collect import judge_comparisons
from workbench.ranking.metrics import (agreement_rate, mean_interval_width, mmrv,
                                       order_swap_consistency, pearson_r, spearman_rho,
                                       success_rates, wilson_interval, win_rate_matrix)
from workbench.ranking.synthetic import synthetic_rollout
from workbench.ranking.validation import (draw_rankings, judge_episode_pairs, paired_difference,
                                          summarize_validation)
from workbench.ranking.sampling import (RolloutIndex, checkpoints, convergence_curve,
                                        demo_rollout_table, sample_comparisons,
                                        wins_from_preferences)

__all__ = [
    "AdaptiveResult",
    "AnnotationSample",
    "BTResult",
    "BootstrapResult",
    "ConvergenceWarning",
    "DisconnectedComparisonsWarning",
    "GapMetaWorldAdapter",
    "RealityGap",
    "ReplayConfig",
    "RolloutIndex",
    "adaptive_comparisons",
    "agreement_rate",
    "agreement_table",
    "automatic_replay",
    "bootstrap_bradley_terry",
    "bt_oracle",
    "checkpoints",
    "convergence_curve",
    "demo_rollout_table",
    "draw_rankings",
    "fit_bradley_terry",
    "fit_bradley_terry_batch",
    "fleiss_kappa",
    "judge_comparisons",
    "judge_episode_pairs",
    "load_annotation_files",
    "majority_votes",
    "mean_interval_width",
    "mmrv",
    "order_swap_consistency",
    "paired_difference",
    "pearson_r",
    "plan_batch",
    "resample_wins",
    "sample_annotation_pairs",
    "sample_comparisons",
    "score_covariance",
    "spearman_rho",
    "success_rates",
    "summarize_validation",
    "synthetic_rollout",
    "table_one",
    "uniform_comparisons",
    "validate_wins",
    "wilson_interval",
    "win_rate_matrix",
    "wins_from_preferences",
]
