"""Policies: the lifecycle base class and the shipped policies, behind a registry.

>>> sorted(POLICIES)
['expert', 'expert-vision-cost', 'vision', 'zero']
>>> make_policy("expert", defect="noise", level=0.3).name
'expert-noise-0.3'
"""

from __future__ import annotations

from typing import Any, Callable

from workbench.policies.base import (
    Capabilities,
    EpisodeContext,
    LifecycleError,
    LoadContext,
    Policy,
    State,
    ZeroPolicy,
)


def _expert(**options: Any) -> Policy:
    from workbench.policies.scripted import ScriptedExpert

    return ScriptedExpert(**options)


def _vision(**options: Any) -> Policy:
    from workbench.policies.vision import VisionPolicy

    return VisionPolicy(**options)


def _expert_vision_cost(**options: Any) -> Policy:
    from workbench.policies.costly import VisionCostExpert

    return VisionCostExpert(**options)


POLICIES: dict[str, Callable[..., Policy]] = {
    "expert": _expert,
    "expert-vision-cost": _expert_vision_cost,
    "vision": _vision,
    "zero": lambda **options: ZeroPolicy(**options),
}


def make_policy(name: str, **options: Any) -> Policy:
    """Build a registered policy, e.g. ``make_policy("expert", defect="delay", level=0.5)``."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; available: {sorted(POLICIES)}")
    try:
        return POLICIES[name](**options)
    except TypeError as exc:
        raise ValueError(f"bad options for policy {name!r}: {exc}") from None


__all__ = [
    "Capabilities", "EpisodeContext", "LifecycleError", "LoadContext", "POLICIES", "Policy",
    "State", "ZeroPolicy", "make_policy",
]
