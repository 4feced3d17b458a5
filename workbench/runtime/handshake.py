"""Before a run claims any case, a policy served elsewhere meets its server.

A policy that defines ``handshake(observation)`` (the clients of openpi and vla-eval
servers) is handed one real observation: the first pending episode of the plan, reset
in a fresh adapter in this process, its policy's features read. The policy sends the
request it would send for it and checks the reply; a mismatch raises (a ValueError
naming the key, so ``workbench eval`` exits 2 in one line) before anything is claimed.
The service backend has no local benchmark to reset, so there the check waits for the
first episode.
"""

from __future__ import annotations

from typing import Any

from workbench.contracts.results import InfrastructureError
from workbench.runtime.job import Job


def handshake_policy(job: Job) -> Any:
    """Run the policy's handshake on a real reset observation, if it has one; returns
    what it returns (the server's metadata), or None."""
    policy = job.parts.policy_factory()
    check = getattr(policy, "handshake", None)
    pending = set(job.store.pending(job.run_id))
    first = next((s for s in sorted(job.plan) if s.episode_id in pending), None)
    if check is None or first is None or job.config.backend == "service":
        return None
    adapter = job.parts.adapter_factory()
    try:
        adapter.reset(first)
        observation = adapter.observe(policy.capabilities.features)
    finally:
        adapter.close()
    try:
        return check(observation | {"episode_id": first.episode_id, "step": 0})
    except InfrastructureError as exc:  # unreachable before the run: nothing to record yet
        raise ValueError(f"policy {job.parts.policy_name}: {exc}") from None
