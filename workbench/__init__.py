"""robo-workbench: fast, reproducible, quality-aware evaluation of robot policies.

The public API, loaded lazily so ``import workbench`` stays fast and needs no
simulator (names resolve on first use).

>>> import workbench
>>> workbench.plan_episodes("metaworld", "MT10", ["reach-v3"], 1)[0].episode_id
'metaworld/MT10/reach-v3/0000'
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Capabilities": "workbench.policies.base",
    "ContractError": "workbench.benchmarks.protocols",
    "EpisodeContext": "workbench.policies.base",
    "EpisodeResult": "workbench.records.store",
    "EpisodeSpec": "workbench.plan",
    "EvalConfig": "workbench.config",
    "LifecycleError": "workbench.policies.base",
    "LoadContext": "workbench.policies.base",
    "Policy": "workbench.policies.base",
    "RecordStore": "workbench.records.store",
    "evaluate": "workbench.evaluate",
    "evaluate_sequential": "workbench.runtime.sequential",
    "get_protocol": "workbench.benchmarks.protocols",
    "load_eval_config": "workbench.config",
    "load_results": "workbench.records.store",
    "make_benchmark": "workbench.benchmarks",
    "make_policy": "workbench.policies",
    "plan_episodes": "workbench.plan",
    "save_figure": "workbench.reports.figures",
    "shard_episodes": "workbench.plan",
    "summarize": "workbench.evaluate",
    "validate_action": "workbench.benchmarks.protocols",
    "validate_observation": "workbench.benchmarks.protocols",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
