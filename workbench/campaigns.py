"""Campaigns: a frozen evaluation whose cases are each attempted once, ever.

``create_campaign(config)`` freezes, in ``<output_dir>/records.sqlite`` (and a readable
``campaign.json`` beside it): the benchmark and suite, the ordered case list, the
budgets (steps and policy calls per episode), the policy's reference, options and
source file, and content hashes of the config, of every workbench source file and of
the policy's source module. :meth:`Campaign.run` re-checks those hashes and refuses,
naming the files that differ, when the code changed; runs the policy's optional
``preflight()`` (no benchmark, no action) before it claims anything; then runs the
unattempted cases through the one runner (:func:`workbench.run`, any backend).

Claims are permanent per case, whatever the run, process or machine: a case is
claimed atomically once. An attempt whose process died stays recorded as
``interrupted`` (an infrastructure error) and runs again only when the user names it
(``run(retry=[case])``, ``workbench campaign run --retry CASE``), a request the records
keep. Several processes, or machines sharing the file, may run one campaign at once.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

import workbench
from workbench.config import EvalConfig, as_config
from workbench.contracts.plan import plan_episodes, shard_episodes
from workbench.records.provenance import package_versions, policy_source, run_provenance
from workbench.records.store import RecordStore, holder_alive, outcome
from workbench.reports.run_report import write_report
from workbench.runner import EvalRun, run
from workbench.runtime.job import build_components

RECORDS = "records.sqlite"
MANIFEST = "campaign.json"
SCHEMA = "workbench.campaign/v1"
STATUS_COLUMNS = ("cases", "done", "succeeded", "failed", "errored", "interrupted",
                  "in_flight", "unattempted")


class CodeChanged(ValueError):
    """The workbench or the policy's source differs from what the campaign froze."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every ``.py`` file under ``root``, by path relative to its parent."""
    return {str(p.relative_to(root.parent)): _sha256(p.read_bytes())
            for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


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
    files = source_hashes(_workbench_root())
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
        "hashes": {"config": _config_hash(frozen), "workbench": _digest(files)},
        "sources": {"workbench": files},
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

    def check_code(self) -> None:
        """Refuse, naming the files, when the workbench or the policy source changed."""
        frozen = self.manifest["sources"]["workbench"]
        now = source_hashes(_workbench_root())
        changed = [f"{f} ({'removed' if f not in now else 'added' if f not in frozen else 'modified'})"
                   for f in sorted(set(frozen) | set(now)) if frozen.get(f) != now.get(f)]
        policy = self.manifest["policy"]
        if policy.get("source_file"):
            path = Path(policy["source_file"])
            if not path.exists():
                changed.append(f"{path} (policy source missing)")
            elif _sha256(path.read_bytes()) != policy["source_hash"]:
                changed.append(f"{path} (policy source modified)")
        if changed:
            more = f" and {len(changed) - 8} more" if len(changed) > 8 else ""
            raise CodeChanged(f"campaign {self.campaign_id}: source changed since it was "
                              f"frozen: {', '.join(changed[:8])}{more}; restore it or create "
                              "a new campaign")

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

        overrides: settings that do not change outcomes (backend, pool, progress, video,
        service...); a setting that would change outcomes is refused.
        """
        self.check_code()
        config = self.config()
        if overrides:
            changed = config.replace(**overrides)
            if changed.key() != config.key() or changed.run_id != config.run_id:
                raise ValueError(f"campaign {self.campaign_id}: {sorted(overrides)} would "
                                 "change outcomes; only how it runs may be overridden")
            config = changed
        self.preflight(config)
        retry = list(retry)
        unknown = [c for c in retry if c not in self.manifest["cases"]]
        if unknown:
            raise ValueError(f"--retry {unknown[0]!r} is not a case of campaign "
                             f"{self.campaign_id}; cases look like {self.manifest['cases'][0]!r}")
        store = RecordStore(self.records_path)
        try:
            store.recover(self.campaign_id)
            for case in retry:
                store.retry(self.campaign_id, case, reason)
        finally:
            store.close()
        return run(config)

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
