"""Where a run was made: the workbench's version and commit, the policy's source, the
simulator packages, Python, the platform, the host and the time.

:func:`run_provenance` is recorded with a run when it is created (the ``runs`` table's
``provenance`` column) and again whenever a later invocation resumes it on different
code or another machine, so a report can say what produced each record.

>>> facts = code_provenance()
>>> sorted(facts) == sorted(CODE_KEYS)
True
"""

from __future__ import annotations

import hashlib
import inspect
import os
import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from workbench.config import EvalConfig

PACKAGE = "robo-workbench"
CODE_KEYS = ("workbench_version", "commit", "dirty", "python", "platform", "host")
"""What :func:`code_provenance` reports: a resumed run records them again where they differ."""


def workbench_root() -> Path:
    """The folder of the ``workbench`` package."""
    return Path(__file__).resolve().parents[1]


def workbench_version() -> str:
    """The installed package's version (``unknown`` when it is not installed)."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"


def git_commit(folder: str | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding ``folder`` (default: the package);
    (None, None) when it is not in one or git is missing. ``dirty``: tracked files of
    the checkout differ from the commit."""
    where = folder or str(workbench_root())
    try:
        commit = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        # --no-optional-locks: status would otherwise refresh and rewrite the checkout's
        # index under .git/index.lock, failing the user's own git commands meanwhile (and
        # leaving the lock behind if killed)
        status = subprocess.run(["git", "--no-optional-locks", "-C", where, "status",
                                 "--porcelain", "--untracked-files=no"], capture_output=True,
                                text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def code_provenance() -> dict[str, Any]:
    """The workbench's version and commit, Python, the platform and the host."""
    commit, dirty = git_commit()
    return {"workbench_version": workbench_version(), "commit": commit, "dirty": dirty,
            "python": sys.version.split()[0], "platform": platform.platform(),
            "host": socket.gethostname()}


def package_versions(modules: Iterable[str]) -> dict[str, str]:
    """Installed versions of the top-level packages of ``modules`` (the workbench's own
    left out; packages that are not installed distributions are skipped)."""
    out = {}
    for name in sorted({m.split(".")[0] for m in modules} - {"workbench"}):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def policy_source(config: EvalConfig) -> tuple[str | None, str | None]:
    """(source file, SHA-256 of its bytes) of the module defining ``config``'s policy;
    (None, None) when it has no source file (built in, or defined interactively)."""
    target = config.policy_factory().load()
    try:
        path = inspect.getsourcefile(target)
    except TypeError:
        path = None
    if path is None or not os.path.isfile(path):
        return None, None
    return str(Path(path).resolve()), hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run_provenance(config: EvalConfig) -> dict[str, Any]:
    """What to record with a run of ``config``: :func:`code_provenance`, the policy's
    source file and hash, the benchmark's packages and versions, and the time (UTC)."""
    source_file, source_hash = policy_source(config)
    return {**code_provenance(), "recorded": datetime.now(timezone.utc).isoformat(
                timespec="seconds"),
            "policy_source_file": source_file, "policy_source_hash": source_hash,
            "benchmark_versions": package_versions(config.benchmark_class.preload)}
