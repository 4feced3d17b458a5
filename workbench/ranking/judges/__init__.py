"""Judges of rollout pairs behind one interface: a VLM, humans, an offline heuristic.

Every judge has ``name``, ``description`` and ``compare(a, b, task) -> Preference``.
:mod:`workbench.ranking.judges.loopback` holds a deterministic fake server for tests; it
is not a judge.
"""

from workbench.ranking.judges.base import Judge, JudgeStats, Preference, RolloutRef, parse_choice
from workbench.ranking.judges.human import HumanJudge, load_annotations, majority_vote, unanimity_rate
from workbench.ranking.judges.offline import HEURISTIC_LABEL, OfflineJudge, assess, describe_quality
from workbench.ranking.judges.vlm import VLMConfig, VLMError, VLMJudge

__all__ = [
    "HEURISTIC_LABEL",
    "HumanJudge",
    "Judge",
    "JudgeStats",
    "OfflineJudge",
    "Preference",
    "RolloutRef",
    "VLMConfig",
    "VLMError",
    "VLMJudge",
    "assess",
    "describe_quality",
    "load_annotations",
    "majority_vote",
    "parse_choice",
    "unanimity_rate",
]
