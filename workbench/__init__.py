"""robo-workbench: fast, reproducible, quality-aware evaluation of robot policies.

The public API, loaded lazily so ``import workbench`` stays fast and needs no
simulator (names resolve on first use).

>>> import workbench
>>> workbench.plan_episodes("metaworld", "MT10", ["reach-v3"], 1)[0].episode_id
'metaworld/MT10/reach-v3/0000'

The road from a config to records is :func:`workbench.run`; see :mod:`workbench.runner`.
"""

from __future__ import annotations

from workbench._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "ActionContract": "workbench.contracts",
    "BenchmarkAdapter": "workbench.benchmarks",
    "Campaign": "workbench.campaigns",
    "Capabilities": "workbench.contracts",
    "ConfigError": "workbench.errors",
    "ContractError": "workbench.errors",
    "EpisodeContext": "workbench.contracts",
    "EpisodeObserver": "workbench.runtime.episode",
    "EpisodeResult": "workbench.contracts",
    "EpisodeSpec": "workbench.contracts",
    "ErrorKind": "workbench.contracts",
    "EvalConfig": "workbench.config",
    "EvalRun": "workbench.runner",
    "Feature": "workbench.contracts",
    "InfrastructureError": "workbench.errors",
    "LifecycleError": "workbench.policies",
    "LoadContext": "workbench.contracts",
    "Policy": "workbench.policies",
    "PolicyError": "workbench.errors",
    "PolicyLoadFailed": "workbench.contracts.results",
    "PoolConfig": "workbench.config",
    "Protocol": "workbench.contracts",
    "RecordStore": "workbench.records",
    "StepResult": "workbench.benchmarks",
    "Stop": "workbench.contracts.capabilities",
    "TransportError": "workbench.errors",
    "WorkbenchError": "workbench.errors",
    "check_adapter": "workbench.checks",
    "check_policy": "workbench.checks",
    "compare": "workbench.comparison",
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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
