"""Judges of rollout pairs behind one interface: a VLM, humans, an offline heuristic.

Every judge has ``name``, ``description`` and ``compare(a, b, task) -> Preference``.
:mod:`workbench.ranking.judges.loopback` holds a deterministic fake server for tests; it
is not a judge. Names load on first use, as in :mod:`workbench.ranking`.
"""

from workbench._lazy import lazy_exports

_EXPORTS = {
    "HEURISTIC_LABEL": "workbench.ranking.judges.offline",
    "HumanJudge": "workbench.ranking.judges.human",
    "Judge": "workbench.ranking.judges.base",
    "JudgeStats": "workbench.ranking.judges.base",
    "OfflineJudge": "workbench.ranking.judges.offline",
    "Preference": "workbench.ranking.judges.base",
    "RolloutRef": "workbench.ranking.judges.base",
    "VLMConfig": "workbench.ranking.judges.vlm",
    "VLMError": "workbench.ranking.judges.vlm",
    "VLMJudge": "workbench.ranking.judges.vlm",
    "assess": "workbench.ranking.judges.offline",
    "describe_quality": "workbench.ranking.judges.offline",
    "load_annotations": "workbench.ranking.judges.human",
    "parse_choice": "workbench.ranking.judges.base",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
