"""Durable per-episode records in SQLite (WAL mode), one file per run or campaign.

A run holds a frozen plan: every planned episode is a row from the start, with a
status that only moves forward: ``planned`` -> ``claimed`` -> ``finished``. A claim
succeeds once, atomically, whichever process or machine asks; each claim is also an
``attempts`` row. An episode left ``claimed`` by a process that died is never silently
retried: :meth:`RecordStore.recover` marks it finished, ``interrupted``, with an
infrastructure error. It runs again only through :meth:`RecordStore.retry`, an
explicit request naming the case, which is itself recorded (``retries``).

Whose claim is live: each claim names its holder (host, process id and the process's
start time). A holder on this host is dead when that process is gone; a holder on
another host is dead when its heartbeat (refreshed every few seconds while it holds
claims) is older than ``lease_s``. So several processes, on one machine or on several
sharing the file, can run one campaign without stealing each other's episodes.

Error kinds (:class:`~workbench.contracts.results.ErrorKind`) keep infrastructure
apart from task failure; infrastructure errors are excluded from success rates.

A file that cannot be trusted is refused, never silently used or overwritten
(:class:`RecordsError`, naming the file and what is wrong): a folder, a file that is
not SQLite or not the workbench's (foreign tables, ``episodes`` a view, a schema newer
than this code's), one ``PRAGMA quick_check`` finds damaged, an empty file beside the
rollouts, videos or manifest of runs it held (truncated), one that cannot be written
(read-only, full disk). Each run's row keeps its plan's size and the count and an
order-independent digest of its finished rows; resuming a run whose rows no longer
match (a finished row deleted or edited) is refused. Readers (:func:`read_records`)
read a damaged file as far as it can be read and say what is missing.

>>> import tempfile, os
>>> store = RecordStore(os.path.join(tempfile.mkdtemp(), "run.sqlite"))
>>> from workbench.contracts.plan import plan_episodes
>>> plan = plan_episodes("metaworld", "MT10", ["reach-v3"], 2)
>>> store.create_run("r1", plan, {"policy": "expert"})
'r1'
>>> store.claim("r1", plan[0].episode_id, worker="w0")
True
>>> store.claim("r1", plan[0].episode_id, worker="w1")
False
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd
import psutil

from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.results import EpisodeResult, ErrorKind
from workbench.errors import WorkbenchError

SCHEMA_VERSION = 3
"""``PRAGMA user_version`` of files this code writes (older files are upgraded on open)."""
HEADER = b"SQLite format 3\x00"
_OUR_TABLES = ("runs", "episodes", "attempts", "retries", "campaigns", "searches",
               "judge_stats")
_REQUIRED = {"runs": {"run_id", "plan_hash", "config"},
             "episodes": {"run_id", "episode_id", "status", "task", "success", "error_kind"}}
_RUN_ARTIFACTS = ("rollouts", "videos", "interactions", "history", "campaign.json",
                  "report.json")
"""What a folder holds once a run has written to it: an empty records file beside any
of these was truncated, not new."""


class RecordsError(WorkbenchError, ValueError):
    """A records file that cannot be trusted, read or written, in one line naming the
    file and what is wrong. ``exit_code``: 2 before a run starts, 1 once it runs."""

    exit_code = 2


class RecordsWriteFailed(RecordsError):
    """A write failed while a run was recording (full disk, read-only file): the run
    stops; what was recorded stays recorded."""

    exit_code = 1


_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    plan_hash TEXT NOT NULL,
    config TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    episode_id TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    suite TEXT NOT NULL,
    task TEXT NOT NULL,
    episode_index INTEGER NOT NULL,
    init_state_id INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    policy TEXT NOT NULL,
    diagnostic INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'planned'
        CHECK (status IN ('planned', 'claimed', 'finished')),
    worker TEXT,
    claimed_at REAL,
    finished_at REAL,
    success INTEGER,
    terminal_step INTEGER,
    steps INTEGER,
    wall_s REAL,
    error_kind TEXT CHECK (error_kind IS NULL OR error_kind IN ('policy', 'infrastructure')),
    error_message TEXT,
    video_path TEXT,
    rollout_path TEXT,
    policy_calls INTEGER,
    observations INTEGER,
    PRIMARY KEY (run_id, episode_id)
);
CREATE TABLE IF NOT EXISTS attempts (
    run_id TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    holder TEXT NOT NULL,
    worker TEXT,
    claimed_at REAL NOT NULL,
    finished_at REAL,
    outcome TEXT,
    PRIMARY KEY (run_id, episode_id, attempt)
);
CREATE TABLE IF NOT EXISTS retries (
    run_id TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    requested_at REAL NOT NULL,
    holder TEXT NOT NULL,
    previous_outcome TEXT NOT NULL,
    reason TEXT
);
CREATE TABLE IF NOT EXISTS campaigns (
    campaign_id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    manifest TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS searches (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    created REAL NOT NULL,
    search TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judge_stats (
    label TEXT NOT NULL,
    created REAL NOT NULL,
    judge TEXT NOT NULL,
    stats TEXT NOT NULL
);
"""
# columns added after the first release, with their types (older files gain them on open)
_ADDED_COLUMNS = {"policy_calls": "INTEGER", "observations": "INTEGER",
                  "decisions": "INTEGER", "rejections": "INTEGER", "termination": "TEXT",
                  "progress": "REAL",
                  "interactions_path": "TEXT", "interrupted": "INTEGER NOT NULL DEFAULT 0",
                  "attempt": "INTEGER NOT NULL DEFAULT 0", "holder": "TEXT",
                  "heartbeat_at": "REAL"}
_ADDED_RUN_COLUMNS = {"provenance": "TEXT", "plan_size": "INTEGER",
                      "finished": "INTEGER NOT NULL DEFAULT 0",
                      "finished_digest": "INTEGER NOT NULL DEFAULT 0"}
"""Columns of the runs table added later (older files gain them on open; NULL there)."""
LEASE_S = 120.0
"""A holder on another host whose heartbeat is older than this is taken for dead."""
HEARTBEAT_S = 5.0


def outcome(success: Any, error_kind: Any, interrupted: Any) -> str:
    """One word for a finished episode: succeeded, failed, errored (policy or
    infrastructure error) or interrupted."""
    if interrupted:
        return "interrupted"
    if error_kind is not None and not (isinstance(error_kind, float) and pd.isna(error_kind)):
        return "errored"
    return "succeeded" if bool(success) else "failed"


_OPEN_STORES: set[str] = set()
"""Tokens of this process's open stores: a claim made through a store since closed (a
run interrupted in a notebook kernel that lives on) is dead though its process lives."""


@functools.lru_cache(maxsize=None)
def _process_id(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:{psutil.Process(pid).create_time():.3f}"


def holder_alive(holder: str, heartbeat_at: float | None, lease_s: float = LEASE_S) -> bool:
    """Whether the store named by ``holder`` (``host:pid:start:token``) may still be
    running its claims."""
    try:
        host, pid, started, token = holder.rsplit(":", 3)
        pid_value, started_value = int(pid), float(started)
    except ValueError:
        return False
    if host != socket.gethostname():
        return heartbeat_at is not None and time.time() - heartbeat_at < lease_s
    if pid_value == os.getpid():
        return token in _OPEN_STORES
    try:
        return abs(psutil.Process(pid_value).create_time() - started_value) < 1e-2
    except psutil.NoSuchProcess:
        return False


def plan_hash(plan: Sequence[EpisodeSpec]) -> str:
    text = "\n".join(s.episode_id for s in sorted(plan))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_DIGEST_MOD = 2**61 - 1
_DIGESTED = ("episode_id", "attempt", "success", "error_kind", "interrupted", "steps",
             "terminal_step", "policy_calls")


def row_digest(row: Sequence[Any]) -> int:
    """One finished row's contribution to its run's ``finished_digest`` (the sum, modulo
    a prime, over finished rows, so the order they finished in does not matter); ``row``
    holds the :data:`_DIGESTED` columns."""
    text = "\x1f".join("" if v is None else repr(v) for v in row)
    return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16) % _DIGEST_MOD


def _check_file(path: Path) -> None:
    """Refuse, before SQLite touches it, what cannot be a records file: a folder, a file
    without SQLite's header, an empty file where runs have written (truncated)."""
    if path.is_dir():
        raise RecordsError(f"records file {path} is a folder, not a file")
    if not path.exists():
        return
    size = path.stat().st_size
    if size == 0:
        beside = [name for name in _RUN_ARTIFACTS if (path.parent / name).exists()]
        if beside and not _wal_holds_data(path):
            raise RecordsError(
                f"records file {path} is empty (0 bytes) but its folder holds "
                f"{', '.join(beside)} of runs it recorded: it was truncated; restore it from "
                "a copy (nothing was written, nothing will be re-run)")
        return
    with path.open("rb") as f:
        head = f.read(len(HEADER))
    if head != HEADER:
        raise RecordsError(f"records file {path} is not an SQLite database (it starts with "
                           f"{head[:16]!r}); nothing was written")


def _wal_holds_data(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return wal.exists() and wal.stat().st_size > 0


def _sqlite_problem(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if "disk is full" in text or "database or disk is full" in text:
        return "the disk is full"
    if "readonly" in text or "read-only" in text:
        return "it is read-only"
    if "malformed" in text or "not a database" in text:
        return f"it is damaged ({text})"
    return text


class RecordStore:
    """One SQLite file; safe to use from several processes (each opens its own connection).

    readonly: open for reading only, never creating or changing anything, and reading a
    damaged file as far as it can be read (what could not be read is in ``problems``);
    a writable store refuses a file that is not sound (:class:`RecordsError`)."""

    def __init__(self, path: str | os.PathLike, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.problems: list[str] = []
        self._conn: sqlite3.Connection | None = None
        self._beat: threading.Thread | None = None
        self._stop_beat = threading.Event()
        self._token = uuid.uuid4().hex[:12]
        _check_file(self.path)
        if readonly and not self.path.exists():
            raise FileNotFoundError(f"no records file at {self.path}")
        if not readonly and self.path.exists() and not (
                os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK)):
            which = "file" if not os.access(self.path, os.W_OK) else "folder"
            raise RecordsError(f"records file {self.path} is read-only (its {which} cannot be "
                               "written), so nothing could be recorded; make it writable, or "
                               f"read it with `workbench results {self.path}`")
        if not readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise RecordsError(f"records file {self.path}: cannot create its folder "
                                   f"({exc.strerror or exc})") from None
        _OPEN_STORES.add(self._token)
        self._checked = False
        try:
            self._open_checked()
            self._checked = True
        except BaseException:
            self.close()
            raise

    def _open_checked(self) -> None:
        """Integrity, ownership and schema version; creates or upgrades the schema of a
        writable store."""
        try:
            conn = self._connect()
        except sqlite3.DatabaseError as exc:
            raise RecordsError(f"records file {self.path} cannot be opened: "
                               f"{_sqlite_problem(exc)}; nothing was written") from None
        try:
            check = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as exc:
            check = [_sqlite_problem(exc)]
        try:
            objects = dict(conn.execute("SELECT name, type FROM sqlite_master "
                                        "WHERE name NOT LIKE 'sqlite_%'").fetchall())
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            if not self.readonly:
                raise RecordsError(f"records file {self.path} cannot be opened: "
                                   f"{_sqlite_problem(exc)}; nothing was written") from None
            self.problems.append(f"its table list cannot be read: {_sqlite_problem(exc)}")
            self._empty = False
            return
        if check != ["ok"]:
            damage = " ".join(" ".join(check[:3]).replace("*** in database main ***", "")
                              .split())[:300]
            if not self.readonly:
                raise RecordsError(
                    f"records file {self.path} is damaged (integrity check: {damage}); nothing "
                    f"was written: read what it still holds with `workbench results "
                    f"{self.path}`, and run again from a copy or a new folder")
            self.problems.append(f"damaged (integrity check: {damage})")
        self._check_ours(objects, version)
        self._empty = "episodes" not in objects
        if self.readonly and not objects:
            self.problems.append("holds no records")
        if not self.readonly:
            self._write_schema(bool(objects))

    def _check_ours(self, objects: dict[str, str], version: int) -> None:
        ours = [t for t in _OUR_TABLES if t in objects]
        if objects and not ours:
            raise RecordsError(f"records file {self.path} is not a workbench records file "
                               f"(it holds {', '.join(sorted(objects)[:6])})")
        for table in ours:
            if objects[table] != "table":
                raise RecordsError(f"records file {self.path} is not a workbench records file"
                                   f" ({table!r} is a {objects[table]}, not a table)")
        for table, needed in _REQUIRED.items():
            if table in objects:
                have = {r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")}
                missing = sorted(needed - have)
                if missing:
                    raise RecordsError(f"records file {self.path} has a schema the workbench "
                                       f"did not write (table {table} lacks "
                                       f"{', '.join(missing)})")
        if version > SCHEMA_VERSION:
            raise RecordsError(f"records file {self.path} was written by a newer workbench "
                               f"(schema {version}; this one reads up to {SCHEMA_VERSION}); "
                               "upgrade the workbench")

    def _write_schema(self, existed: bool) -> None:
        try:
            conn = self._connect()
            self._wal()
            conn.executescript(_SCHEMA)
            self._add_missing_columns()
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise RecordsError(f"records file {self.path} cannot be "
                               f"{'upgraded' if existed else 'created'}: "
                               f"{_sqlite_problem(exc)}; nothing was written") from None

    def _add_missing_columns(self) -> None:
        for table, added in (("episodes", _ADDED_COLUMNS), ("runs", _ADDED_RUN_COLUMNS)):
            have = {row[1] for row in self._connect().execute(f"PRAGMA table_info({table})")}
            for name, kind in added.items():
                if name not in have:
                    self._connect().execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            if self.readonly:
                uri = f"{self.path.resolve().as_uri()}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None)
            else:
                self._conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
                if getattr(self, "_checked", True):  # a new store sets WAL once checked
                    self._wal()
        return self._conn

    def _wal(self) -> None:
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")

    class _Tx:
        """One write transaction; an SQLite failure becomes a :class:`RecordsError`
        (``during_run``: a :class:`RecordsWriteFailed`) naming the file and the action."""

        def __init__(self, store: "RecordStore", action: str, during_run: bool) -> None:
            self.store, self.action, self.during_run = store, action, during_run

        def _failed(self, exc: BaseException) -> RecordsError:
            kind = RecordsWriteFailed if self.during_run else RecordsError
            stopped = ("; the run stopped, what was recorded stays recorded"
                       if self.during_run else "; nothing was written")
            return kind(f"records file {self.store.path}: cannot {self.action}: "
                        f"{_sqlite_problem(exc)}{stopped}")

        def __enter__(self) -> sqlite3.Connection:
            if self.store.readonly:
                raise self._failed(sqlite3.OperationalError("opened read-only"))
            self.conn = self.store._connect()
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise self._failed(exc) from None
            return self.conn

        def __exit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> bool:
            try:
                self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
            except sqlite3.DatabaseError as failed:
                if self.conn.in_transaction:
                    try:
                        self.conn.execute("ROLLBACK")
                    except sqlite3.DatabaseError:
                        pass
                if exc_type is None:
                    raise self._failed(failed) from None
            if isinstance(exc, sqlite3.DatabaseError):
                raise self._failed(exc) from None
            return False

    def _tx(self, action: str = "write", during_run: bool = False) -> "RecordStore._Tx":
        return RecordStore._Tx(self, action, during_run)

    @property
    def holder(self) -> str:
        """``host:pid:start-time:token``: who holds the claims made through this store."""
        return f"{_process_id(os.getpid())}:{self._token}"

    def close(self) -> None:
        _OPEN_STORES.discard(self._token)
        if self._beat is not None:
            self._stop_beat.set()
            self._beat.join()
            self._beat = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __getstate__(self) -> dict:  # picklable for worker processes: reconnect there
        return {"path": self.path, "readonly": self.readonly, "problems": list(self.problems),
                "_conn": None, "_beat": None,
                "_stop_beat": threading.Event(), "_token": uuid.uuid4().hex[:12]}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        _OPEN_STORES.add(self._token)

    def _heartbeat(self) -> None:
        """Refresh this process's claims' heartbeat until closed (own connection)."""
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        holder = self.holder
        try:
            while not self._stop_beat.wait(HEARTBEAT_S):
                conn.execute("UPDATE episodes SET heartbeat_at=? WHERE holder=? AND "
                             "status='claimed'", (time.time(), holder))
        finally:
            conn.close()

    def _start_heartbeat(self) -> None:
        if self._beat is None:
            self._stop_beat.clear()
            self._beat = threading.Thread(target=self._heartbeat, daemon=True,
                                          name="records-heartbeat")
            self._beat.start()

    # -- plan -------------------------------------------------------------------
    def create_run(self, run_id: str, plan: Sequence[EpisodeSpec], config: dict[str, Any],
                   policy: str | None = None, diagnostic: bool = False,
                   provenance: dict[str, Any] | None = None) -> str:
        """Freeze ``plan`` under ``run_id``. Re-opening a run with a different plan is refused.

        provenance: where this invocation runs (:func:`~workbench.records.provenance.
        run_provenance`); kept with the run, and appended to its ``resumed`` list when a
        later invocation runs on other code or another host (keys ``code_keys``)."""
        digest = plan_hash(plan)
        policy = policy or str(config.get("policy", "policy"))
        with self._tx(f"record run {run_id!r}") as c:
            row = c.execute("SELECT plan_hash, provenance FROM runs WHERE run_id=?",
                            (run_id,)).fetchone()
            if row is not None:
                if row[0] != digest:
                    raise ValueError(f"run {run_id!r} exists in {self.path} with a different plan;"
                                     " use a new run id (plans are frozen)")
                self._check_rows(c, run_id, plan)
                if provenance is not None:
                    self._note_resumed(c, run_id, row[1], provenance)
                return run_id
            c.execute("INSERT INTO runs (run_id, created, plan_hash, config, provenance, "
                      "plan_size) VALUES (?, ?, ?, ?, ?, ?)",
                      (run_id, time.time(), digest, json.dumps(config, default=str),
                       None if provenance is None else json.dumps(provenance, default=str),
                       len(plan)))
            c.executemany(
                "INSERT INTO episodes (run_id, episode_id, benchmark, suite, task, episode_index,"
                " init_state_id, seed, policy, diagnostic) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(run_id, s.episode_id, s.benchmark, s.suite, s.task, s.episode_index,
                  s.init_state_id, s.seed, policy, int(diagnostic)) for s in sorted(plan)])
        return run_id

    def _check_rows(self, c: sqlite3.Connection, run_id: str,
                    plan: Sequence[EpisodeSpec] | None = None) -> None:
        """Refuse a run whose rows no longer match what its row counted: a planned case
        without a row, finished rows deleted, added or edited (count and digest)."""
        problems = self._row_problems(c, run_id, plan)
        if problems:
            raise RecordsError(f"records file {self.path}: run {run_id!r} does not match "
                               f"what it recorded: {'; '.join(problems)}; nothing is re-run "
                               "(restore the file from a copy, or start a new run id in a "
                               "new folder)")

    def _row_problems(self, c: sqlite3.Connection, run_id: str,
                      plan: Sequence[EpisodeSpec] | None = None) -> list[str]:
        size, finished, digest = c.execute(
            "SELECT plan_size, finished, finished_digest FROM runs WHERE run_id=?",
            (run_id,)).fetchone()
        ids = [r[0] for r in c.execute("SELECT episode_id FROM episodes WHERE run_id=?",
                                       (run_id,))]
        if size is None:  # written before counts were kept: count from here on
            c.execute("UPDATE runs SET plan_size=?, finished=?, finished_digest=? "
                      "WHERE run_id=?", (len(ids), *self._finished_now(c, run_id), run_id))
            return []
        problems = []
        missing = sorted(set(s.episode_id for s in plan) - set(ids)) if plan else []
        if len(ids) != size or missing:
            named = f" ({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''})" \
                if missing else ""
            problems.append(f"the plan has {size} cases, {len(ids)} rows remain{named}")
        count, now = self._finished_now(c, run_id)
        if count != finished:
            problems.append(f"{finished} finished episodes were recorded, {count} remain "
                            "finished")
        elif now != digest:
            problems.append("a finished episode's recorded outcome was changed")
        return problems

    @staticmethod
    def _finished_now(c: sqlite3.Connection, run_id: str) -> tuple[int, int]:
        rows = c.execute(f"SELECT {', '.join(_DIGESTED)} FROM episodes WHERE run_id=? AND "
                         "status='finished'", (run_id,)).fetchall()
        return len(rows), sum(row_digest(r) for r in rows) % _DIGEST_MOD

    @staticmethod
    def _count_finished(c: sqlite3.Connection, run_id: str, episode_id: str,
                        sign: int) -> None:
        """Add (sign 1) or take away (-1) one finished row in its run's count and digest."""
        row = c.execute(f"SELECT {', '.join(_DIGESTED)} FROM episodes WHERE run_id=? AND "
                        "episode_id=?", (run_id, episode_id)).fetchone()
        c.execute("UPDATE runs SET finished=finished+?, finished_digest=(finished_digest+?) "
                  "% ? WHERE run_id=?",
                  (sign, (sign * row_digest(row)) % _DIGEST_MOD, _DIGEST_MOD, run_id))

    def verify(self, run_id: str | None = None) -> list[str]:
        """What no longer matches the runs' counts (all runs, or one): an empty list for
        sound records."""
        try:
            c = self._connect()
            ids = [run_id] if run_id else [r[0] for r in c.execute("SELECT run_id FROM runs")]
            return [f"run {rid!r}: {p}" for rid in ids
                    for p in self._row_problems_readonly(c, rid)]
        except sqlite3.DatabaseError as exc:
            return [f"cannot be checked: {_sqlite_problem(exc)}"]

    def _row_problems_readonly(self, c: sqlite3.Connection, run_id: str) -> list[str]:
        row = c.execute("SELECT plan_size FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is None or row[0] is None:
            return []
        return self._row_problems(c, run_id)

    @staticmethod
    def _note_resumed(c: sqlite3.Connection, run_id: str, stored: str | None,
                      provenance: dict[str, Any]) -> None:
        """Append ``provenance`` to the run's ``resumed`` list when its code facts (version,
        commit, dirty, Python, platform, host) differ from the first and from the last."""
        from workbench.records.provenance import CODE_KEYS

        first = json.loads(stored) if stored else {}
        last = (first.get("resumed") or [first])[-1]
        facts = {k: provenance.get(k) for k in CODE_KEYS}
        if all(last.get(k) == v for k, v in facts.items()):
            return
        first.setdefault("resumed", []).append({**facts, "recorded": provenance.get("recorded")})
        c.execute("UPDATE runs SET provenance=? WHERE run_id=?",
                  (json.dumps(first, default=str), run_id))

    def provenance(self, run_id: str) -> dict[str, Any] | None:
        """What :meth:`create_run` recorded of where the run was made (None: nothing)."""
        row = self._connect().execute("SELECT provenance FROM runs WHERE run_id=?",
                                      (run_id,)).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def run_details(self) -> dict[str, dict[str, Any]]:
        """Per run id, its frozen ``config`` and its ``provenance`` (None where none was
        recorded, or where it cannot be read: noted in ``problems``), in the order the
        runs were created."""
        try:
            rows = self._connect().execute(
                "SELECT run_id, config, provenance FROM runs ORDER BY created").fetchall()
        except sqlite3.DatabaseError as exc:
            if not self.readonly:
                raise RecordsError(f"records file {self.path} cannot be read: "
                                   f"{_sqlite_problem(exc)}") from None
            self.problems.append(f"runs unreadable ({_sqlite_problem(exc)})")
            return {}
        details = {}
        for run_id, config, provenance in rows:
            details[str(run_id)] = {"config": self._json(run_id, "config", config),
                                    "provenance": self._json(run_id, "provenance",
                                                             provenance)}
        return details

    def _json(self, run_id: Any, what: str, text: Any) -> Any:
        if text is None:
            return None
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            self.problems.append(f"run {run_id!r}: its {what} is not JSON, left out")
            return None

    def pending(self, run_id: str) -> list[str]:
        """Episode ids still ``planned`` (never claimed), in canonical order."""
        rows = self._connect().execute(
            "SELECT episode_id FROM episodes WHERE run_id=? AND status='planned' "
            "ORDER BY episode_id", (run_id,)).fetchall()
        return [r[0] for r in rows]

    # -- claims and results -----------------------------------------------------
    def claim(self, run_id: str, episode_id: str, worker: str) -> bool:
        """Claim a planned episode for this process; ``False`` if it was already claimed
        or finished (by anyone, ever: only :meth:`retry` makes it claimable again)."""
        now, holder = time.time(), self.holder
        with self._tx(f"claim episode {episode_id!r}", during_run=True) as c:
            cur = c.execute(
                "UPDATE episodes SET status='claimed', worker=?, claimed_at=?, holder=?, "
                "heartbeat_at=?, attempt=attempt+1 "
                "WHERE run_id=? AND episode_id=? AND status='planned'",
                (worker, now, holder, now, run_id, episode_id))
            if cur.rowcount != 1:
                return False
            c.execute("INSERT INTO attempts (run_id, episode_id, attempt, holder, worker, "
                      "claimed_at) SELECT run_id, episode_id, attempt, holder, worker, "
                      "claimed_at FROM episodes WHERE run_id=? AND episode_id=?",
                      (run_id, episode_id))
        self._start_heartbeat()
        return True

    def finish(self, run_id: str, episode_id: str, result: EpisodeResult) -> None:
        """Record a claimed episode's result; refuses to overwrite a finished one."""
        with self._tx(f"record episode {episode_id!r}", during_run=True) as c:
            cur = c.execute(
                "UPDATE episodes SET status='finished', finished_at=?, success=?, terminal_step=?,"
                " steps=?, wall_s=?, error_kind=?, error_message=?, video_path=?, rollout_path=?,"
                " policy_calls=?, observations=?, decisions=?, rejections=?, termination=?,"
                " interactions_path=?, progress=?"
                " WHERE run_id=? AND episode_id=? AND status='claimed'",
                (time.time(), int(result.success), result.terminal_step, result.steps,
                 result.wall_s, None if result.error_kind is None else result.error_kind.value,
                 result.error_message, result.video_path, result.rollout_path,
                 result.policy_calls, result.observations, result.decisions, result.rejections,
                 result.termination, result.interactions_path, result.progress, run_id,
                 episode_id))
            if cur.rowcount != 1:
                raise ValueError(f"episode {episode_id!r} of run {run_id!r} is not claimed; "
                                 "results are written once, to claimed episodes")
            c.execute("UPDATE attempts SET finished_at=?, outcome=? WHERE run_id=? AND "
                      "episode_id=? AND attempt=(SELECT attempt FROM episodes WHERE run_id=? "
                      "AND episode_id=?)",
                      (time.time(), outcome(result.success, result.error_kind, False),
                       run_id, episode_id, run_id, episode_id))
            self._count_finished(c, run_id, episode_id, 1)

    def attempt(self, run_id: str, episode_id: str) -> int:
        """How many times the episode has been claimed (2 and more: explicit retries)."""
        row = self._connect().execute("SELECT attempt FROM episodes WHERE run_id=? AND "
                                      "episode_id=?", (run_id, episode_id)).fetchone()
        return 0 if row is None else int(row[0])

    def recover(self, run_id: str, reason: str = "its process died before it finished",
                lease_s: float = LEASE_S) -> list[str]:
        """Mark episodes whose claim holder is dead (see the module docstring) as
        interrupted infrastructure errors; never retried. Returns their ids."""
        now = time.time()
        with self._tx(f"mark interrupted episodes of run {run_id!r}") as c:
            rows = c.execute("SELECT episode_id, holder, heartbeat_at FROM episodes "
                             "WHERE run_id=? AND status='claimed'", (run_id,)).fetchall()
            ids = [eid for eid, holder, beat in rows
                   if holder is None or not holder_alive(holder, beat, lease_s)]
            for eid in ids:
                c.execute(
                    "UPDATE episodes SET status='finished', finished_at=?, success=0, steps=0,"
                    " error_kind=?, error_message=?, interrupted=1, termination='error' "
                    "WHERE run_id=? AND episode_id=?",
                    (now, ErrorKind.INFRASTRUCTURE.value,
                     f"interrupted: {reason} (not retried)", run_id, eid))
                c.execute("UPDATE attempts SET finished_at=?, outcome='interrupted' WHERE "
                          "run_id=? AND episode_id=? AND outcome IS NULL", (now, run_id, eid))
                self._count_finished(c, run_id, eid, 1)
        return ids

    def retry(self, run_id: str, episode_ids: str | Sequence[str],
              reason: str | None = None) -> None:
        """Make interrupted or infrastructure-errored episodes claimable once more, on
        the user's explicit request, each recorded in ``retries``. All of ``episode_ids``
        are checked before any is changed, in one transaction: a case named twice, an
        unknown case, a task success or failure, a policy error or an episode not yet
        finished refuses the whole request (outcomes are never re-drawn)."""
        ids = [episode_ids] if isinstance(episode_ids, str) else list(episode_ids)
        twice = sorted({e for e in ids if ids.count(e) > 1})
        if twice:
            raise ValueError(f"case {twice[0]!r} is named twice: one attempt per case per "
                             "retry request; nothing was retried")
        with self._tx(f"retry cases {ids[:3]}") as c:
            previous = {eid: self._retryable(c, run_id, eid) for eid in ids}
            for eid in ids:
                c.execute("INSERT INTO retries VALUES (?, ?, ?, ?, ?, ?)",
                          (run_id, eid, time.time(), self.holder, previous[eid], reason))
                self._count_finished(c, run_id, eid, -1)
                c.execute("UPDATE episodes SET status='planned', worker=NULL, claimed_at=NULL,"
                          " finished_at=NULL, success=NULL, terminal_step=NULL, steps=NULL, "
                          "wall_s=NULL, error_kind=NULL, error_message=NULL, video_path=NULL, "
                          "rollout_path=NULL, policy_calls=NULL, observations=NULL, "
                          "decisions=NULL, rejections=NULL, termination=NULL, progress=NULL, "
                          "interactions_path=NULL, interrupted=0, holder=NULL, "
                          "heartbeat_at=NULL WHERE run_id=? AND episode_id=?", (run_id, eid))

    @staticmethod
    def _retryable(c: sqlite3.Connection, run_id: str, episode_id: str) -> str:
        """The case's outcome word, if it may be retried; else ValueError (nothing done)."""
        row = c.execute("SELECT status, success, error_kind, interrupted FROM episodes "
                        "WHERE run_id=? AND episode_id=?", (run_id, episode_id)).fetchone()
        if row is None:
            raise ValueError(f"no case {episode_id!r} in {run_id!r}; nothing was retried")
        status, success, error_kind, interrupted = row
        previous = outcome(success, error_kind, interrupted) if status == "finished" \
            else status
        if status != "finished" or not (interrupted or error_kind == "infrastructure"):
            raise ValueError(
                f"case {episode_id!r} is {previous}"
                + (f" ({error_kind} error)" if previous == "errored" else "")
                + "; only an interrupted or infrastructure-errored case may be retried; "
                "nothing was retried")
        return previous

    def campaign_ids(self) -> list[str]:
        """The campaigns frozen in this file."""
        return [r[0] for r in self._connect().execute("SELECT campaign_id FROM campaigns")]

    # -- campaigns --------------------------------------------------------------
    def create_campaign(self, campaign_id: str, manifest: dict[str, Any]) -> None:
        """Store a campaign's frozen manifest; refuses an id that exists."""
        with self._tx(f"record campaign {campaign_id!r}") as c:
            if c.execute("SELECT 1 FROM campaigns WHERE campaign_id=?",
                         (campaign_id,)).fetchone():
                raise ValueError(f"campaign {campaign_id!r} exists in {self.path}; "
                                 "campaigns are frozen (create a new one)")
            c.execute("INSERT INTO campaigns VALUES (?, ?, ?)",
                      (campaign_id, time.time(), json.dumps(manifest, default=str)))

    def campaign(self, campaign_id: str | None = None) -> dict[str, Any]:
        """A campaign's manifest (the only one in the file when ``campaign_id`` is None)."""
        rows = self._connect().execute("SELECT campaign_id, manifest FROM campaigns").fetchall()
        found = [m for cid, m in rows if campaign_id is None or cid == campaign_id]
        if len(found) != 1:
            known = [cid for cid, _ in rows]
            raise ValueError(f"no campaign {campaign_id!r} in {self.path}; found: {known}"
                             if campaign_id is not None or not known else
                             f"{self.path} holds several campaigns {known}; name one")
        return json.loads(found[0])

    def record_search(self, run_id: str, search: dict[str, Any]) -> None:
        """Keep what a concurrency search probed, decided and chose for ``run_id``."""
        with self._tx("record the concurrency search", during_run=True) as c:
            c.execute("INSERT INTO searches VALUES (?, ?, ?)",
                      (run_id, time.time(), json.dumps(search, default=str)))

    def searches(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The searches recorded (for ``run_id``, or all), oldest first, each with its
        ``run_id`` (one that cannot be read is left out and noted in ``problems``)."""
        query, args = "SELECT run_id, search FROM searches", ()
        if run_id is not None:
            query, args = query + " WHERE run_id=?", (run_id,)
        try:
            rows = self._connect().execute(query + " ORDER BY created", args).fetchall()
        except sqlite3.DatabaseError as exc:
            if not self.readonly:
                raise RecordsError(f"records file {self.path} cannot be read: "
                                   f"{_sqlite_problem(exc)}") from None
            self.problems.append(f"searches unreadable ({_sqlite_problem(exc)})")
            return []
        found = [(rid, self._json(rid, "search", text)) for rid, text in rows]
        return [{"run_id": rid, **search} for rid, search in found if isinstance(search, dict)]

    def record_judge_stats(self, label: str, judge: str, stats: dict[str, Any]) -> None:
        """Keep a judge's accounting (requests, tokens, retries, frames per request, ...)
        for one ranking, named ``label``, beside the episodes it judged."""
        with self._tx("record judge statistics") as c:
            c.execute("INSERT INTO judge_stats VALUES (?, ?, ?, ?)",
                      (label, time.time(), judge, json.dumps(stats, default=float)))

    def judge_stats(self, label: str | None = None) -> pd.DataFrame:
        """One row per recorded judging, oldest first: label, created, judge and the
        recorded counters as columns."""
        query, args = "SELECT label, created, judge, stats FROM judge_stats", ()
        if label is not None:
            query, args = query + " WHERE label=?", (label,)
        rows = self._connect().execute(query + " ORDER BY created", args).fetchall()
        return pd.DataFrame([{"label": lab, "created": created, "judge": judge,
                              **json.loads(text)} for lab, created, judge, text in rows])

    def attempts(self, run_id: str | None = None) -> pd.DataFrame:
        """Every claim ever made (one row per attempt), with its outcome."""
        query, args = "SELECT * FROM attempts", ()
        if run_id is not None:
            query, args = query + " WHERE run_id=?", (run_id,)
        return pd.read_sql_query(query + " ORDER BY run_id, episode_id, attempt",
                                 self._connect(), params=args)

    def retries(self, run_id: str | None = None) -> pd.DataFrame:
        """Every explicit retry request."""
        query, args = "SELECT * FROM retries", ()
        if run_id is not None:
            query, args = query + " WHERE run_id=?", (run_id,)
        return pd.read_sql_query(query + " ORDER BY requested_at", self._connect(), params=args)

    # -- reading ----------------------------------------------------------------
    def runs(self) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM runs ORDER BY created", self._connect())

    def results(self, run_id: str | None = None) -> pd.DataFrame:
        """Per-episode rows (all runs, or one) as a DataFrame. A row that cannot be read,
        or a value of the wrong type (left empty), is noted in ``problems``."""
        query, args = "SELECT * FROM episodes", ()
        if run_id is not None:
            query, args = query + " WHERE run_id=?", (run_id,)
        if self.readonly and getattr(self, "_empty", False):
            return self._typed(pd.DataFrame(columns=["run_id", "episode_id", "benchmark",
                                                     "suite", "task", "policy", "status",
                                                     "success", "error_kind"]))
        try:
            cursor = self._connect().execute(query + " ORDER BY run_id, episode_id", args)
            columns = [d[0] for d in cursor.description]
            df = pd.DataFrame(cursor.fetchall(), columns=columns)
        except sqlite3.DatabaseError as exc:
            if not self.readonly:
                raise RecordsError(f"records file {self.path} cannot be read: "
                                   f"{_sqlite_problem(exc)}") from None
            df = self._salvage(run_id, exc)
        return self._typed(df)

    def _salvage(self, run_id: str | None, exc: BaseException) -> pd.DataFrame:
        """The episode rows that can still be read, one by one, from a damaged file."""
        c = self._connect()
        columns = ["run_id", "episode_id", "benchmark", "suite", "task", "episode_index",
                   "init_state_id", "seed", "policy", "diagnostic", "status", "success",
                   "error_kind", "error_message", "interrupted"]
        try:
            columns = [r[1] for r in c.execute("PRAGMA table_info(episodes)")] or columns
        except sqlite3.DatabaseError:
            pass
        try:
            last = c.execute("SELECT max(rowid) FROM episodes").fetchone()[0] or 0
        except sqlite3.DatabaseError:
            last = None
        expected = None
        try:
            expected = c.execute("SELECT sum(plan_size) FROM runs").fetchone()[0]
        except sqlite3.DatabaseError:
            pass
        bound = min(last or expected or 10_000, 1_000_000)
        rows, unreadable = [], 0
        for rowid in range(1, bound + 1):
            try:
                row = c.execute("SELECT * FROM episodes WHERE rowid=?", (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                unreadable += 1
                continue
            if row is not None and (run_id is None or row[0] == run_id):
                rows.append(row)
        lost = (expected - len(rows)) if expected and run_id is None else unreadable
        self.problems.append(f"episode rows unreadable ({_sqlite_problem(exc)}): "
                             f"{len(rows)} read" + (f", {lost} lost" if lost else ""))
        width = len(columns)
        return pd.DataFrame([tuple(r)[:width] for r in rows], columns=columns[:width])

    _NUMERIC = ("episode_index", "init_state_id", "seed", "diagnostic", "claimed_at",
                "finished_at", "success", "terminal_step", "steps", "wall_s", "policy_calls",
                "observations", "decisions", "rejections", "interrupted", "attempt",
                "heartbeat_at", "progress")

    def _typed(self, df: pd.DataFrame) -> pd.DataFrame:
        """Columns in their types; a value that is not (a number where one belongs, a
        flag other than 0/1, an unknown status) is emptied and named in ``problems``."""
        for column in ("video_path", "rollout_path", "interactions_path", "termination",
                       "error_message", "holder", "worker", "policy_calls", "observations",
                       "decisions", "rejections", "interrupted", "attempt", "heartbeat_at",
                       "progress"):
            if column not in df:
                df[column] = 0 if column in ("interrupted", "attempt") else None
        bad: list[str] = []
        for column in self._NUMERIC:
            if column not in df:
                continue
            raw = df[column]
            values = pd.to_numeric(raw, errors="coerce")
            if column in ("success", "diagnostic", "interrupted"):
                values = values.where(values.isin([0, 1]))
            wrong = raw.notna() & values.isna()
            bad += [f"{eid}: {column} holds {str(v)[:40]!r}"
                    for eid, v in zip(df.loc[wrong, "episode_id"], raw[wrong])]
            df[column] = values
        for column, allowed in (("status", ("planned", "claimed", "finished")),
                                ("error_kind", ("policy", "infrastructure", None))):
            wrong = ~df[column].isin(allowed) & (df[column].notna() | (column == "status"))
            bad += [f"{eid}: {column} holds {str(v)[:40]!r}"
                    for eid, v in zip(df.loc[wrong, "episode_id"], df.loc[wrong, column])]
            df.loc[wrong, column] = "finished" if column == "status" else None
        if bad:
            self.problems.append(f"{len(bad)} values of the wrong type, left empty: "
                                 + "; ".join(bad[:3]) + (" ..." if len(bad) > 3 else ""))
        df["success"] = df["success"].astype("boolean")
        df["diagnostic"] = df["diagnostic"].fillna(0).astype(bool)
        df["interrupted"] = df["interrupted"].fillna(0).astype(int)
        df["attempt"] = df["attempt"].fillna(0).astype(int)
        return df

    def iter_json(self, run_id: str | None = None) -> Iterator[dict[str, Any]]:
        """One JSON-ready dict per episode: task, episode, success, terminal_step, steps,
        policy_calls, error, worker, ..."""
        for row in self.results(run_id).to_dict("records"):
            yield {
                "run_id": row["run_id"], "episode_id": row["episode_id"], "task": row["task"],
                "episode": _int_or_none(row["episode_index"]),
                "init_state_id": _int_or_none(row["init_state_id"]),
                "policy": row["policy"], "status": row["status"],
                "success": None if pd.isna(row["success"]) else bool(row["success"]),
                "terminal_step": _int_or_none(row["terminal_step"]),
                "steps": _int_or_none(row["steps"]), "wall_s": _float_or_none(row["wall_s"]),
                "policy_calls": _int_or_none(row["policy_calls"]),
                "observations": _int_or_none(row["observations"]),
                "decisions": _int_or_none(row["decisions"]),
                "rejections": _int_or_none(row["rejections"]),
                "termination": row["termination"], "interrupted": bool(row["interrupted"]),
                "progress": None if pd.isna(row["progress"]) else float(row["progress"]),
                "attempt": int(row["attempt"]), "worker": row["worker"],
                "error": None if pd.isna(row["error_kind"]) else
                {"kind": row["error_kind"], "message": row["error_message"]},
                "diagnostic": bool(row["diagnostic"]),
            }


def read_records(path: str | os.PathLike, run_id: str | None = None
                 ) -> tuple[pd.DataFrame, list[str]]:
    """A records file's per-episode rows (all runs, or one), read as far as they can be,
    and what is wrong with the file: damage, unreadable rows, values of the wrong type,
    runs whose rows no longer match their counts. Never writes to the file."""
    store = RecordStore(path, readonly=True)
    try:
        results = store.results(run_id)
        if not any(p.startswith("cannot be opened") for p in store.problems):
            store.problems.extend(store.verify(run_id))
        return results, list(dict.fromkeys(store.problems))
    finally:
        store.close()


def load_results(path: str | os.PathLike, run_id: str | None = None) -> pd.DataFrame:
    """Per-episode results of a records file as a DataFrame (read-only; what could not
    be read is listed in ``.attrs["problems"]``)."""
    results, problems = read_records(path, run_id)
    results.attrs["problems"] = problems
    return results


def _int_or_none(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _float_or_none(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
