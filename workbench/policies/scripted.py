"""MetaWorld's scripted experts as Policies, and graded variants of known quality order.

The experts read the privileged 39-D state, so their results are diagnostics, not
capability scores. Their raw actions can exceed the action bounds (MetaWorld clips
them inside ``step``); the policy clips them to the contract's [-1, 1] itself.

Graded variants degrade the expert in seeded, reproducible ways. For a given
``level`` in [0, 1] (0 = the expert itself) the defects are:

- ``noise``: Gaussian action noise with standard deviation ``level``;
- ``delay``: actions applied ``round(10 * level)`` steps late;
- ``hesitate``: with probability ``0.1 * level`` per step, start a pause of 3 to 8 steps
  with zero motion;
- ``jerky``: with probability ``0.5 * level`` per step, an overshooting correction
  (action scaled by up to ``1 + 2 * level`` with sign flips on one axis).

Several defects can be stacked (``defects=[("noise", 0.1), ("jerky", 0.3)]``), applied
in that order. Quality decreases with ``level`` within a defect and with every defect
added on top; ``GRADED_LADDER`` stacks one more defect per rung, so its order is known
by construction (and measured in the tests) for validating rankings.

>>> ScriptedExpert(defects=[("noise", 0.1), ("jerky", 0.3)]).name
'expert-noise-0.1+jerky-0.3'
"""

from __future__ import annotations

import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from workbench.contracts.capabilities import Capabilities, EpisodeContext, LoadContext, Observation
from workbench.policies.base import Policy

DEFECTS = ("none", "noise", "delay", "hesitate", "jerky")


@dataclass
class _ExpertEpisode:
    expert: Any
    rng: np.random.Generator
    queue: deque = field(default_factory=deque)
    pause_left: int = 0


class ScriptedExpert(Policy):
    """MetaWorld's hand-written expert for the episode's task (privileged)."""

    name = "expert"
    preload = ("metaworld.policies", "workbench.policies.scripted")

    def __init__(self, defect: str = "none", level: float = 0.0,
                 defects: Sequence[Sequence[Any]] | None = None) -> None:
        super().__init__()
        stack = [(defect, level)] if defects is None else [tuple(d) for d in defects]
        for name, value in stack:
            if name not in DEFECTS:
                raise ValueError(f"unknown defect {name!r}; available: {list(DEFECTS)}")
            if not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"level: expected in [0, 1]; got {value}")
        self.defects = tuple((str(n), float(v)) for n, v in stack if n != "none")
        if self.defects:
            self.name = "expert-" + "+".join(f"{n}-{v:g}" for n, v in self.defects)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(action_protocol="metaworld-v1", features=("privileged.state",),
                            privileged=True, runtime_invariant=True)

    def _load(self, context: LoadContext) -> None:
        from metaworld.policies import ENV_POLICY_MAP

        self._experts = ENV_POLICY_MAP

    def _reset(self, context: EpisodeContext) -> _ExpertEpisode:
        silence_gain_warning()
        if context.task not in self._experts:
            raise ValueError(f"no scripted expert for task {context.task!r}")
        return _ExpertEpisode(self._experts[context.task](),
                              np.random.default_rng(context.seed))

    def _act(self, observation: Observation, ep: _ExpertEpisode) -> np.ndarray:
        action = np.asarray(ep.expert.get_action(observation["privileged.state"]), np.float64)
        for defect, level in self.defects:
            action = _degrade(action, defect, level, ep)
        return np.clip(action, -1.0, 1.0).astype(np.float32)


GAIN_WARNING = r"Constant\(s\) may be too high"
"""What MetaWorld's experts warn whenever their own gains exceed the action range the
environment clips to: harmless, and printed by every run."""


def silence_gain_warning() -> None:
    """Ignore :data:`GAIN_WARNING` where MetaWorld's experts raise it (their module only;
    the same words from anywhere else still warn). Checked at every episode's reset, so a
    caller that restores the warning filters (pytest does per test) does not bring it
    back."""
    for action, message, _, module, _ in warnings.filters:
        if action == "ignore" and message is not None and message.pattern == GAIN_WARNING:
            return
    warnings.filterwarnings("ignore", message=GAIN_WARNING, category=UserWarning,
                            module=r"metaworld\.policies\.policy")


def _degrade(action: np.ndarray, defect: str, level: float, ep: _ExpertEpisode) -> np.ndarray:
    if defect == "noise":
        return action + ep.rng.normal(0.0, level, size=action.shape)
    if defect == "delay":
        ep.queue.append(action)
        if len(ep.queue) <= round(10 * level):
            return np.zeros_like(action)
        return ep.queue.popleft()
    if defect == "hesitate":
        if ep.pause_left == 0 and ep.rng.random() < 0.1 * level:
            ep.pause_left = int(ep.rng.integers(3, 9))
        if ep.pause_left > 0:
            ep.pause_left -= 1
            return np.concatenate([np.zeros(3), action[3:]])
        return action
    if defect == "jerky" and ep.rng.random() < 0.5 * level:
        out = action * (1.0 + 2.0 * level * ep.rng.random())
        axis = int(ep.rng.integers(0, 3))
        out[axis] = -out[axis]
        return out
    return action


# Variants whose quality order is known: each rung keeps the defects of the rung
# before and adds one, so it is worse on every criterion the defect touches.
GRADED_LADDER: tuple[tuple[tuple[str, float], ...], ...] = (
    (),
    (("noise", 0.1),),
    (("noise", 0.1), ("jerky", 0.3)),
    (("noise", 0.1), ("jerky", 0.3), ("hesitate", 0.5)),
    (("noise", 0.1), ("jerky", 0.3), ("hesitate", 0.5), ("delay", 0.5)),
)
