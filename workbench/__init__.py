"""robo-workbench: fast, reproducible, quality-aware evaluation of robot policies.

The public API, loaded lazily so ``import workbench`` stays fast and needs no
simulator (names resolve on first use).

>>> import workbench
>>> workbench.plan_episodes("metaworld", "MT10", ["reach-v3"], 1)[0].episode_id
'metaworld/MT10/reach-v3/0000'

The road from a config to records is :func:`workbench.run`; see :mod:`workbench.runner`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "BenchmarkAdapter": "workbench.benchmarks",
    "Capabilities": "workbench.contracts",
    "Campaign": "workbench.campaigns",
    "ContractError": "workbench.contracts",
    "EpisodeContext": "workbench.contracts",
    "EpisodeObserver": "workbench.runtime.episode",
    "EpisodeResult": "workbench.contracts",
    "EpisodeSpec": "workbench.contracts",
    "ErrorKind": "workbench.contracts",
    "EvalConfig": "workbench.config",
    "EvalRun": "workbench.runner",
    "LifecycleError": "workbench.policies",
    "LoadContext": "workbench.contracts",
    "Policy": "workbench.policies",
    "PoolConfig": "workbench.config",
    "RecordStore": "workbench.records",
    "Stop": "workbench.contracts.capabilities",
    "create_campaign": "workbench.campaigns",
    "get_protocol": "workbench.contracts",
    "load_config": "workbench.config",
    "load_results": "workbench.records",
    "make_benchmark": "workbench.benchmarks",
    "make_policy": "workbench.policies",
    "open_campaign": "workbench.campaigns",
    "open_pool": "workbench.runner",
    "open_ray_pool": "workbench.runner",
    "plan_episodes": "workbench.contracts",
    "protocol_names": "workbench.contracts",
    "register_protocol": "workbench.contracts",
    "run": "workbench.runner",
    "run_episode": "workbench.runtime.episode",
    "save_figure": "workbench.reports",
    "shard_episodes": "workbench.contracts",
    "summarize": "workbench.contracts",
    "validate_action": "workbench.contracts",
    "validate_observation": "workbench.contracts",
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
