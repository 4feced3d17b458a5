"""The sequential evaluator: the official-like reference loop.

One environment, one policy, an observation rendered at every step at the
benchmark's default quality, episodes one after another. Every speedup is measured
against it, so it stays simple: no pools, no skipped renders, no reordering.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import pandas as pd
from tqdm.auto import tqdm

from workbench.benchmarks.base import BenchmarkAdapter, check_compatibility
from workbench.plan import EpisodeSpec
from workbench.policies.base import LoadContext, Policy, State
from workbench.records.media import episode_filename, wants_video
from workbench.records.store import RecordStore
from workbench.runtime.episode import run_episode, save_episode_media


def evaluate_sequential(adapter: BenchmarkAdapter, policy: Policy, plan: Sequence[EpisodeSpec],
                        store: RecordStore, run_id: str, out_dir: str | None = None,
                        video: str | int = "off", observe_every_step: bool = True,
                        progress: bool = True, device: str = "cpu") -> pd.DataFrame:
    """Run ``plan`` (already frozen in ``store`` under ``run_id``) and return its records.

    The policy is checked against the benchmark's protocol before any episode runs.
    Episodes already claimed or finished in ``store`` are skipped (never re-run).
    """
    check_compatibility(adapter.protocol, policy.capabilities)
    if policy.state is State.CREATED:
        policy.load(LoadContext(adapter.protocol.name, device=device))
    pending = set(store.pending(run_id))
    todo = [s for s in sorted(plan) if s.episode_id in pending]
    bar = tqdm(todo, desc=f"{policy.name} on {adapter.name}", unit="ep", disable=not progress)
    wins = 0
    for number, spec in enumerate(bar):
        if not store.claim(run_id, spec.episode_id, worker="sequential"):
            continue
        record_video = wants_video(video, number)
        result, trace = run_episode(adapter, policy, spec, observe_every_step, record_video)
        stem = episode_filename(spec.episode_id, run_id)
        clip, rollout = save_episode_media(trace, stem, out_dir, record_video)
        store.finish(run_id, spec.episode_id,
                     replace(result, video_path=clip, rollout_path=rollout))
        wins += result.success
        bar.set_postfix(success=f"{wins}/{number + 1}")
    return store.results(run_id)
