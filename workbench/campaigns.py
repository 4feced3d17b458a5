"""Campaigns: a frozen evaluation whose cases are each attempted once, ever.

``create_campaign(config)`` freezes, in ``<output_dir>/records.sqlite`` (and a readable
``campaign.json`` beside it): the benchmark and suite, the ordered case list, the
budgets (steps and policy calls per episode), the policy's reference, options and
source file, and content hashes of the config and of everything that decides
behaviour (:mod:`workbench.records.sources`): every file of the workbench package (code,
data, weights), the policy's and the benchmark's own local modules and the local modules
they import, and the files the policy's options name. :meth:`Campaign.run` re-checks
those hashes before it starts and again before every claim, and refuses, naming the
files that differ; runs the policy's optional ``preflight()`` (no benchmark, no
action) before it claims anything; then runs the unattempted cases through the one
runner (any backend).

Claims are permanent per case, whatever the run id, process or machine: a case is
claimed atomically once, in the campaign's own records, and :func:`workbench.run`
refuses the campaign's folder. At run time only how it runs may change
(:data:`RUN_TIME_KEYS`: backend, pools, progress, video, ...); anything else is refused.
An attempt whose process died stays recorded as ``interrupted`` (an infrastructure
error) and runs again only when the user names it (``run(retry=[case])``, ``workbench
campaign run --retry CASE``), a request checked whole before any of it is kept, and
kept. Several processes, or machines sharing the file, may run one campaign at once.

>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> campaign = create_campaign({"benchmark": "metaworld", "suite": "MT1:reach-v3",
...     "policy": "expert", "episodes": 2, "image_size": 32, "output_dir": folder,
...     "progress": False})
>>> campaign.status()[["task", "cases", "unattempted"]].values.tolist()
[['reach-v3', 2, 2], ['ALL', 2, 2]]
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

import workbench
from workbench.config import EvalConfig, as_config
from workbench.contracts.plan import plan_episodes, shard_episodes
from workbench.errors import ConfigError
from workbench.records.provenance import package_versions, policy_source, run_provenance
from workbench.records.sources import (FrozenSources, local_modules, option_files,
                                       package_files)
from workbench.records.store import RecordStore, holder_alive, outcome
from workbench.reports.run_report import write_report
from workbench.runner import EvalRun, execute
from workbench.runtime.job import build_components

RECORDS = "records.sqlite"
MANIFEST = "campaign.json"
SCHEMA = "workbench.campaign/v1"
STATUS_COLUMNS = ("cases", "done", "succeeded", "failed", "errored", "interrupted",
                  "in_flight", "unattempted")


RUN_TIME_KEYS = ("backend", "pool", "search", "ray", "service", "progress", "video",
                 "interactions", "warm_up", "observe")
"""Config keys a campaign run may set: how it runs, never what (nor where it records)."""


SOURCE_LABELS = {"policy": "policy source", "benchmark": "benchmark source",
                 "options": "file named in policy_options"}


class CodeChanged(ConfigError):
    """The workbench, the policy's or benchmark's code, or a file the policy's options
    name differs from what the campaign froze. ``exit_code``: 2 before the run, 1 once
    it ran (a change found before a claim)."""

    exit_code = 2

    def __init__(self, message: str, during_run: bool = False) -> None:
        super().__init__(message)
        self.exit_code = 1 if during_run else 2


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every ``.py`` file under ``root``, by path relative to its parent (what
    campaigns frozen before :mod:`workbench.records.sources` hashed)."""
    return {str(p.relative_to(root.parent)): _sha256(p.read_bytes())
            for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


class _LegacySources:
    """The check of a campaign frozen before the scheme: the workbench's ``.py`` files."""

    def __init__(self, frozen: Mapping[str, str]) -> None:
        self.frozen = dict(frozen)

    def changed(self) -> list[str]:
        now = source_hashes(_workbench_root())
        return [f"{f} ({'removed' if f not in now else 'added' if f not in self.frozen else 'modified'})"
                for f in sorted(set(self.frozen) | set(now)) if self.frozen.get(f) != now.get(f)]


def _digest(files: Mapping[str, str]) -> str:
    return _sha256(json.dumps(dict(sorted(files.items()))).encode())


def _config_hash(config: dict[str, Any]) -> str:
    return _sha256(json.dumps(config, sort_keys=True, default=str).encode())


def _workbench_root() -> Path:
    return Path(workbench.__file__).resolve().parent


def create_campaign(config: EvalConfig | Mapping[str, Any],
                    campaign_id: str | None = None) -> "Campaign":
    """Freeze ``config`` as a campaign in its ``output_dir``; returns it.

    campaign_id: default ``<policy>-<suite>-<config key>`` (the run id). A folder that
    already holds a campaign is refused (campaigns are frozen; make a new folder).
    """
    config = as_config(config)
    campaign_id = campaign_id or config.resolved_run_id()
    config = config.replace(run_id=campaign_id)
    parts = build_components(config)
    adapter = config.benchmark_class
    plan = shard_episodes(plan_episodes(adapter.name, config.suite, config.task_names(),
                                        config.episodes), config.shards, config.shard)
    source_file, source_hash = policy_source(config)
    root = _workbench_root()
    files = package_files(root)
    sources = {"workbench": files,
               "policy": local_modules(config.policy_factory().load(), [root]),
               "benchmark": local_modules(adapter, [root]),
               "options": option_files(config.policy_options)}
    frozen = config.to_dict()
    manifest = {
        "schema": SCHEMA, "campaign_id": campaign_id, "created": time.time(),
        "config": frozen,
        "benchmark": {"name": adapter.name, "suite": config.suite,
                      "protocol": adapter.protocol.name,
                      "versions": package_versions(adapter.preload)},
        "policy": {"reference": frozen["policy"], "name": parts.policy_name,
                   "options": frozen["policy_options"], "source_file": source_file,
                   "source_hash": source_hash},
        "budgets": {"max_steps": min(config.max_steps or adapter.max_steps, adapter.max_steps),
                    "max_policy_calls": config.max_policy_calls,
                    "invalid_actions": config.invalid_actions},
        "hashes": {"config": _config_hash(frozen), "workbench": _digest(files),
                   **{f"{g}_sources": _digest(f) for g, f in sources.items() if g != "workbench"}},
        "sources": {"scheme": 2, **sources},
        "cases": [s.episode_id for s in sorted(plan)],
        "backend": config.backend, "service_url": config.service.url,
        "python": sys.version.split()[0], "workbench_version": workbench.__version__,
    }
    folder = Path(config.output_dir)
    store = RecordStore(folder / RECORDS)
    try:
        if not store.runs().empty:
            raise ValueError(f"{folder} already holds records; a campaign needs a folder "
                             "of its own")
        store.create_campaign(campaign_id, manifest)
        store.create_run(campaign_id, plan, frozen, policy=parts.policy_name,
                         diagnostic=parts.capabilities.privileged,
                         provenance=run_provenance(config))
    finally:
        store.close()
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str))
    return Campaign(folder, manifest)


def open_campaign(path: str | Path) -> "Campaign":
    """The campaign in a folder (or its ``records.sqlite``)."""
    path = Path(path)
    folder = path.parent if path.suffix == ".sqlite" else path
    if not (folder / RECORDS).exists():
        raise FileNotFoundError(f"no campaign records at {folder / RECORDS}")
    store = RecordStore(folder / RECORDS)
    try:
        manifest = store.campaign()
    finally:
        store.close()
    return Campaign(folder, manifest)


@dataclass
class Campaign:
    """A frozen campaign in ``folder``; see the module docstring."""

    folder: Path
    manifest: dict[str, Any]
    _frozen: Any = field(default=None, init=False, repr=False, compare=False)

    @property
    def campaign_id(self) -> str:
        return self.manifest["campaign_id"]

    @property
    def records_path(self) -> Path:
        return self.folder / RECORDS

    def config(self) -> EvalConfig:
        """The frozen config (refuses one whose hash no longer matches)."""
        config = as_config({**self.manifest["config"], "output_dir": str(self.folder)})
        frozen = {**config.to_dict(), "output_dir": self.manifest["config"]["output_dir"]}
        if _config_hash(frozen) != self.manifest["hashes"]["config"]:
            raise CodeChanged(f"campaign {self.campaign_id}: the frozen config no longer "
                              "validates to the same settings (defaults changed?)")
        return config

    def check_code(self, during_run: bool = False) -> None:
        """Refuse, naming the files, when anything the campaign froze differs: a file of
        the workbench package, a local module of the policy or benchmark, a file the
        policy's options name (cheap to repeat: files are re-hashed only when changed)."""
        changed = self._sources().changed()
        policy = self.manifest["policy"]
        if "scheme" not in self.manifest["sources"] and policy.get("source_file"):
            path = Path(policy["source_file"])  # a campaign frozen before the scheme
            if not path.exists():
                changed.append(f"{path} (policy source missing)")
            elif _sha256(path.read_bytes()) != policy["source_hash"]:
                changed.append(f"{path} (policy source modified)")
        if changed:
            more = f" and {len(changed) - 8} more" if len(changed) > 8 else ""
            raise CodeChanged(f"campaign {self.campaign_id}: source changed since it was "
                              f"frozen: {', '.join(changed[:8])}{more}; "
                              + ("the run stopped before its next claim; " if during_run
                                 else "") + "restore it or create a new campaign",
                              during_run)

    def _sources(self) -> FrozenSources:
        if self._frozen is None:
            sources = self.manifest["sources"]
            if "scheme" in sources:
                groups = {g: f for g, f in sources.items() if g != "scheme"}
                self._frozen = FrozenSources(groups, roots={"workbench": _workbench_root()},
                                             labels=SOURCE_LABELS)
            else:  # before the scheme: .py files of the workbench only
                self._frozen = _LegacySources(sources["workbench"])
        return self._frozen

    def preflight(self, config: EvalConfig | None = None) -> None:
        """The policy's own readiness check (no benchmark, no action), if it has one."""
        config = config or self.config()
        policy = config.policy_factory()()
        check = getattr(policy, "preflight", None)
        if check is None:
            return
        try:
            check()
        except Exception as exc:
            raise ValueError(f"preflight of policy {policy.name!r} failed, nothing was "
                             f"claimed: {type(exc).__name__}: {exc}") from None

    def run(self, retry: Iterable[str] = (), reason: str | None = None,
            **overrides: Any) -> EvalRun:
        """Run every unattempted case (and the ``retry`` cases, on explicit request).

        overrides: how it runs, keys of :data:`RUN_TIME_KEYS` (a section as a mapping:
        ``pool={"workers": 4}``); any other key is refused (none of these is in
        :meth:`EvalConfig.key`, the hash of what decides outcomes). retry: cases to attempt once more, each interrupted or an
        infrastructure error, each named once; the request is checked whole before any
        of it is recorded.
        """
        self.check_code()
        config = self._run_time(self.config(), overrides)
        retry = self._retry_list(retry)
        self.preflight(config)
        store = RecordStore(self.records_path)
        try:
            store.recover(self.campaign_id)
            if retry:
                store.retry(self.campaign_id, retry, reason)
        finally:
            store.close()
        return execute(config, campaign=self.campaign_id,
                       before_claim=lambda: self.check_code(during_run=True))

    def _run_time(self, config: EvalConfig, overrides: Mapping[str, Any]) -> EvalConfig:
        """``config`` with the run-time ``overrides``; one line naming a key that is not a
        config key, or that may not change once a campaign is frozen."""
        known = set(config.to_dict())
        for key in overrides:
            if key not in known:
                raise ValueError(f"campaign {self.campaign_id}: {key!r} is not a config key; "
                                 f"run-time keys: {', '.join(RUN_TIME_KEYS)}")
            if key not in RUN_TIME_KEYS:
                raise ValueError(f"campaign {self.campaign_id}: {key!r} cannot be set when a "
                                 "campaign runs (it decides what runs or where it is "
                                 f"recorded); run-time keys: {', '.join(RUN_TIME_KEYS)}")
        return config.replace(**overrides) if overrides else config

    def _retry_list(self, retry: Iterable[str]) -> list[str]:
        retry = [retry] if isinstance(retry, str) else list(retry)
        for case in retry:
            if not isinstance(case, str) or case not in self.manifest["cases"]:
                raise ValueError(f"--retry {case!r} is not a case of campaign "
                                 f"{self.campaign_id}; cases look like "
                                 f"{self.manifest['cases'][0]!r}; nothing was retried")
        twice = sorted({c for c in retry if retry.count(c) > 1})
        if twice:
            raise ValueError(f"--retry {twice[0]!r} is given twice: one attempt per case per "
                             "--retry request; nothing was retried")
        return retry

    # -- reading ----------------------------------------------------------------------
    def results(self) -> pd.DataFrame:
        store = RecordStore(self.records_path)
        try:
            return store.results(self.campaign_id)
        finally:
            store.close()

    def attempts(self) -> pd.DataFrame:
        store = RecordStore(self.records_path)
        try:
            return store.attempts(self.campaign_id)
        finally:
            store.close()

    def status(self) -> pd.DataFrame:
        """Per task and overall (``ALL``): cases, done, succeeded, failed, errored,
        interrupted, in flight, unattempted."""
        return campaign_status(self.results())

    def report(self, out_dir: str | Path | None = None,
               self_contained: bool = False) -> tuple[Path, Path]:
        """Write ``report.json``/``report.html`` and every episode's interaction history
        page (``history/``), or one self-contained page (see
        :func:`~workbench.reports.run_report.write_report`)."""
        out = Path(out_dir or self.folder)
        results = self.results()
        manifest = {k: v for k, v in self.manifest.items() if k != "sources"}
        store = RecordStore(self.records_path)
        try:
            runs = store.run_details()
        finally:
            store.close()
        return write_report(results, out, manifest, runs=runs, self_contained=self_contained)


def campaign_status(results: pd.DataFrame) -> pd.DataFrame:
    """Status counts per task and ``ALL`` from a campaign's records. A claim whose
    holder is dead (a killed process; see :mod:`workbench.records.store`) counts as
    interrupted already, though the records mark it so only at the next run."""
    df = results.copy()
    claimed = df["status"].eq("claimed")
    dead = claimed & pd.Series([c and not holder_alive(h or "", None if pd.isna(b) else b)
                                for c, h, b in zip(claimed, df["holder"], df["heartbeat_at"])],
                               index=df.index, dtype=bool)
    done = df["status"].eq("finished") | dead
    kinds = ["interrupted" if k else outcome(s, e, i) if d else None for s, e, i, d, k in
             zip(df["success"], df["error_kind"], df["interrupted"], done, dead)]
    df = df.assign(done=done, succeeded=[k == "succeeded" for k in kinds],
                   failed=[k == "failed" for k in kinds], errored=[k == "errored" for k in kinds],
                   interrupted=[k == "interrupted" for k in kinds],
                   in_flight=claimed & ~dead, unattempted=df["status"].eq("planned"))
    counts = df.groupby("task").agg(cases=("episode_id", "size"),
                                    **{c: (c, "sum") for c in STATUS_COLUMNS[1:]})
    counts.loc["ALL"] = counts.sum()
    return counts.reset_index().astype({c: int for c in STATUS_COLUMNS})
