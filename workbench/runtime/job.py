"""What the runner hands a backend: the run's components, frozen plan and records.

:func:`build_components` resolves a config's benchmark and policy once, in the
driver: the policy is built (not loaded) to read its capabilities, and checked against
the benchmark's protocol before any process starts or any episode is claimed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from workbench.benchmarks.base import check_compatibility
from workbench.config import EvalConfig
from workbench.contracts.capabilities import Capabilities
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import Protocol
from workbench.contracts.registry import Factory
from workbench.contracts.results import load_blamed_on
from workbench.errors import ConfigError
from workbench.policies.base import Policy
from workbench.records.store import RecordStore
from workbench.runtime.episode import EpisodeOptions
from workbench.runtime.guard import guarded
from workbench.runtime.sink import RecordSink, video_episodes

RUNTIME_PRELOAD = ("workbench.runtime.worker", "workbench.runtime.replica")


@dataclass(frozen=True)
class Components:
    """A config's benchmark and policy, resolved: picklable factories for the processes
    that build them, and what the driver needs to know before any of them starts."""

    adapter_factory: Factory
    policy_factory: Factory
    protocol: Protocol
    capabilities: Capabilities
    policy_name: str
    preload: tuple[str, ...]
    image_size: int
    device: str

    @property
    def camera_count(self) -> int:
        """How many image features the policy reads (what the transport must hold)."""
        return sum(self.protocol.feature(f).dtype == "uint8" for f in self.capabilities.features)


def build_components(config: EvalConfig) -> Components:
    """Resolve ``config``'s benchmark and policy; raises ContractError when the policy
    reads features or emits actions the benchmark does not serve."""
    adapter_cls = config.benchmark_class
    factory = config.policy_factory()
    policy = build_policy(factory, config.policy, config.policy_options)
    check_compatibility(adapter_cls.protocol, policy.capabilities)
    preload = tuple(dict.fromkeys(RUNTIME_PRELOAD + adapter_cls.preload + type(policy).preload))
    return Components(config.adapter_factory(), factory, adapter_cls.protocol,
                      policy.capabilities, policy.name, preload, config.image_size, config.device)


def build_policy(factory: Factory, ref: Any, options: Mapping[str, Any]) -> Policy:
    """The policy ``factory`` builds (not loaded), its exits refused. A TypeError or
    ValueError of its constructor is the caller's :class:`ConfigError` (the ``options``
    do not fit); any other error of its code is
    :class:`~workbench.contracts.results.PolicyLoadFailed` naming ``ref``."""
    with load_blamed_on(str(getattr(ref, "__name__", ref))):
        try:
            policy = guarded(factory)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"policy {ref!r} with options {dict(options)}: {exc}") from None
    if not isinstance(policy, Policy):
        raise ConfigError(f"policy {ref!r} built a {type(policy).__name__}, "
                          "not a workbench Policy")
    return policy


@dataclass
class Job:
    """One run of a frozen plan: the config, its components, and where records go."""

    config: EvalConfig
    parts: Components
    plan: list[EpisodeSpec]
    store: RecordStore
    run_id: str
    before_claim: Callable[[], None] | None = None
    """Called before every claim (a campaign's check of its frozen sources)."""

    @property
    def output_dir(self) -> Path:
        return Path(self.config.output_dir).resolve()

    def sink(self, label: str) -> RecordSink:
        """A sink over this run's records, its progress bar sized to what is pending; with
        nothing pending, one line says so instead of an empty bar."""
        pending = len(self.store.pending(self.run_id))
        if not pending and self.config.progress:
            print(f"{label}: all {len(self.plan)} episodes already recorded in "
                  f"{self.store.path} (run {self.run_id}); nothing to run", flush=True)
        return RecordSink(self.store, self.run_id, label, pending,
                          self.config.progress and pending > 0, self.before_claim)

    def videos(self) -> set[str]:
        """Episode ids to film (the plan's first N, see ``video``)."""
        return video_episodes(self.plan, self.config.video)

    def episode_options(self) -> EpisodeOptions:
        """How this run's episodes run and record (films none; see :meth:`videos`)."""
        config = self.config
        return EpisodeOptions(config.observe_every_step, self.run_id, str(self.output_dir),
                              max_steps=config.max_steps, interactions=config.interactions,
                              feedback=config.invalid_actions == "feedback",
                              max_policy_calls=config.max_policy_calls,
                              call_timeout_s=config.policy_call_timeout_s)
