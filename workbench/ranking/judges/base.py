"""The one judge interface: compare two anonymous rollouts of one task, answer A or B.

A judge sees a :class:`RolloutRef` (an opaque id, the episode file and its video),
never the policy that produced it, as R2S-Eval hides policy identity (Table VII).

>>> pref = Preference(winner="A", raw="A")
>>> pref.valid, Preference(winner=None, raw="maybe").valid
(True, False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

Choice = Literal["A", "B"]


@dataclass(frozen=True)
class RolloutRef:
    """An anonymous rollout: ``rollout_id``, its ``.npz`` ``path`` and ``video`` (MP4)."""

    rollout_id: str
    path: str | None = None
    video: str | None = None


@dataclass(frozen=True)
class Preference:
    """A judgment: ``winner`` "A" or "B", or None when the judge gave no valid answer.

    ``raw`` is the judge's last answer; ``description_a``/``_b`` what it based it on.
    """

    winner: Choice | None
    raw: str = ""
    description_a: str = ""
    description_b: str = ""
    attempts: int = 1

    @property
    def valid(self) -> bool:
        """True when the judge picked A or B."""
        return self.winner in ("A", "B")


@dataclass
class JudgeStats:
    """Running counts of a judge's work: calls by kind, tokens, seconds spent waiting."""

    describe_calls: int = 0
    compare_calls: int = 0
    invalid_answers: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hits: int = 0
    requests: int = 0
    transport_retries: int = 0
    latencies: list[float] = field(default_factory=list)
    frames_per_request: list[int] = field(default_factory=list)
    """Images sent in each describe request, in order."""

    def as_dict(self) -> dict[str, float]:
        """The counters as a flat dict (the per-request lists summarised: latencies by
        their total, frames by their sum)."""
        out = {k: v for k, v in vars(self).items()
               if k not in ("latencies", "frames_per_request")}
        out["frames_sent"] = sum(self.frames_per_request)
        return {k: float(v) for k, v in out.items()}


@runtime_checkable
class Judge(Protocol):
    """Anything that prefers one of two rollouts of ``task``.

    ``name`` identifies the judge in tables; ``description`` says in words what kind
    of judge it is (a VLM, humans, or an offline heuristic).
    """

    name: str
    description: str

    def compare(self, a: RolloutRef, b: RolloutRef, task: str) -> Preference:
        """Judge rollout ``a`` (shown as Robot A) against ``b`` (Robot B)."""
        ...


def parse_choice(text: str) -> Choice | None:
    """Read an answer that must be exactly "A" or "B" after stripping whitespace,
    quotes and a final period; anything else is None (invalid).

    >>> parse_choice(' "B". '), parse_choice("a"), parse_choice("A because")
    ('B', None, None)
    """
    core = text.strip().strip("\"'`").strip()
    core = core[:-1] if core.endswith(".") else core
    core = core.strip().strip("\"'`").strip()
    return core if core in ("A", "B") else None  # type: ignore[return-value]
