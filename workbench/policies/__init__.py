"""Policies: the lifecycle base class and the shipped policies, reached by reference.

``POLICIES`` knows the workbench's own policies and those that installed packages
register in the ``workbench.policies`` entry-point group; any ``Policy`` class or
factory is also reachable by its import path (``"my_package.my_module:MyPolicy"``)
or passed as an object. A policy that takes a ``protocol`` argument is handed the
benchmark's protocol name when the config does not give one.

>>> POLICIES.names()  # doctest: +NORMALIZE_WHITESPACE
['aloha-scripted', 'expert', 'expert-mlp-cost', 'expert-vision-cost', 'kitchen-light-slide',
 'libero-close-drawer', 'openpi', 'remote', 'robosuite-lift', 'state-bc', 'state-nn', 'vision', 'vla-eval', 'zero']
>>> make_policy("expert", defect="noise", level=0.3).name
'expert-noise-0.3'
>>> make_policy("zero", protocol="calvin-v1").capabilities.action_protocol
'calvin-v1'
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from workbench.contracts.registry import Factory, Registry
from workbench.policies.base import LifecycleError, Policy, State

POLICIES = Registry("policy", "workbench.policies", {
    "aloha-scripted": "workbench.policies.aloha_scripted:AlohaScriptedReplay",
    "expert": "workbench.policies.scripted:ScriptedExpert",
    "expert-mlp-cost": "workbench.policies.costly:MLPCostExpert",
    "expert-vision-cost": "workbench.policies.costly:VisionCostExpert",
    "kitchen-light-slide": "workbench.policies.kitchen_scripted:KitchenLightSlide",
    "libero-close-drawer": "workbench.policies.osc_scripted:LiberoDrawerCloser",
    "openpi": "workbench.policies.openpi:OpenpiPolicy",
    "remote": "workbench.policies.remote:RemotePolicy",
    "robosuite-lift": "workbench.policies.osc_scripted:RobosuiteLifter",
    "state-bc": "workbench.policies.state_bc:StateBCPolicy",
    "state-nn": "workbench.policies.nearest:NearestNeighbourPolicy",
    "vision": "workbench.policies.vision:VisionPolicy",
    "vla-eval": "workbench.policies.vla_eval:VlaEvalPolicy",
    "zero": "workbench.policies.zero:ZeroPolicy",
})


def policy_factory(ref: str | Callable[..., Policy], options: Mapping[str, Any] | None = None,
                   protocol: str | None = None) -> Factory:
    """A picklable factory for the policy ``ref`` names, with constructor ``options``;
    ``protocol`` (the benchmark's) is added to them when the policy takes a ``protocol``
    argument and they do not set it."""
    options = dict(options or {})
    factory = POLICIES.resolve(ref, options)
    if protocol is not None and "protocol" not in options and factory.accepts("protocol"):
        factory = Factory(factory.target, {**options, "protocol": protocol})
    factory.check("policy")
    return factory


def make_policy(ref: str | Callable[..., Policy], protocol: str | None = None,
                **options: Any) -> Policy:
    """Build a policy, e.g. ``make_policy("expert", defect="delay", level=0.5)``;
    ``protocol`` as in :func:`policy_factory`."""
    policy = policy_factory(ref, options, protocol)()
    if not isinstance(policy, Policy):
        raise ValueError(f"policy {ref!r} built a {type(policy).__name__}, not a Policy")
    return policy


__all__ = ["POLICIES", "LifecycleError", "Policy", "State", "make_policy", "policy_factory"]
