"""What a SIM service has run, kept in SQLite beside it, so a restarted service refuses
what it already ran.

One row per scheduled case (its state, attempts and score) and one per kept artifact,
in a WAL-mode file that every claim and every finish commits before the server answers.
The file belongs to one service definition (benchmark, suite, seed, image size, step
limit, options and schedule, hashed): a service started on it with another definition
is refused, naming the file, rather than mixing two schedules' claims. A case that was
``running`` when the service stopped was abandoned: it is loaded as ``abandoned``
(retryable by an operator), never as unattempted.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable

from workbench.errors import ConfigError

SCHEMA = """
CREATE TABLE IF NOT EXISTS service (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases (
    case_id TEXT PRIMARY KEY, state TEXT NOT NULL, attempts INTEGER NOT NULL,
    success INTEGER, terminal_step INTEGER, steps INTEGER NOT NULL,
    rejections INTEGER NOT NULL, termination TEXT, message TEXT);
CREATE TABLE IF NOT EXISTS artifacts (
    name TEXT PRIMARY KEY, case_id TEXT NOT NULL, size INTEGER NOT NULL,
    sha256 TEXT NOT NULL, path TEXT NOT NULL);
"""
CASE_FIELDS = ("state", "attempts", "success", "terminal_step", "steps", "rejections",
               "termination", "message")


class StateError(ConfigError):
    """The state file cannot be used (not ours, damaged, another service's); one line."""

    exit_code = 2


def definition_digest(definition: dict[str, Any]) -> str:
    """SHA-256 of a service definition (JSON with sorted keys)."""
    text = json.dumps(definition, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class ServiceState:
    """The SQLite file at ``path`` for the service ``definition`` (see the module)."""

    def __init__(self, path: str | Path, definition: dict[str, Any]) -> None:
        self.path = Path(path)
        digest = definition_digest(definition)
        if self.path.is_dir():
            raise StateError(f"SIM service state {self.path} is a folder, not a file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            if self.db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("PRAGMA quick_check failed")
            tables = {r[0] for r in self.db.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
            if tables - {"service", "cases", "artifacts"}:
                raise sqlite3.DatabaseError(f"not a SIM service's state (it holds "
                                            f"{sorted(tables)[:5]})")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
            stored = self.db.execute("SELECT value FROM service WHERE key='definition'"
                                     ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise StateError(f"SIM service state {self.path} cannot be used: {exc}") from None
        if stored is None:
            self.db.execute("INSERT INTO service VALUES ('definition', ?)", (digest,))
            self.db.execute("INSERT INTO service VALUES ('summary', ?)",
                            (json.dumps({k: definition[k] for k in
                                         ("benchmark", "suite", "cases")}),))
        elif stored[0] != digest:
            summary = self.db.execute("SELECT value FROM service WHERE key='summary'"
                                      ).fetchone()
            raise StateError(f"SIM service state {self.path} belongs to another service "
                             f"({summary[0] if summary else 'unknown'}); its claims stand: "
                             "serve this schedule with another --state-dir")

    def load(self) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
        """(case id -> stored fields, artifacts); a case left running is now abandoned."""
        self.db.execute("UPDATE cases SET state='abandoned', termination='abandoned', "
                        "message='the service stopped while it ran' WHERE state='running'")
        cases = {row[0]: dict(zip(CASE_FIELDS, row[1:])) for row in self.db.execute(
            f"SELECT case_id, {', '.join(CASE_FIELDS)} FROM cases")}
        for fields in cases.values():
            fields["success"] = None if fields["success"] is None else bool(fields["success"])
        artifacts = [dict(zip(("name", "case", "size", "sha256", "path"), row)) for row in
                     self.db.execute("SELECT name, case_id, size, sha256, path FROM artifacts")]
        return cases, artifacts

    def save(self, case_id: str, fields: dict[str, Any]) -> None:
        """Commit one case's state (before the server answers the request that changed it)."""
        values = [fields[k] for k in CASE_FIELDS]
        self.db.execute(f"INSERT OR REPLACE INTO cases (case_id, {', '.join(CASE_FIELDS)}) "
                        f"VALUES (?{', ?' * len(CASE_FIELDS)})", (case_id, *values))

    def keep_artifacts(self, entries: Iterable[dict[str, Any]]) -> None:
        for e in entries:
            self.db.execute("INSERT OR REPLACE INTO artifacts VALUES (?, ?, ?, ?, ?)",
                            (e["name"], e["case"], e["size"], e["sha256"], e["path"]))

    def close(self) -> None:
        self.db.close()
