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
                  "interactions_path": "TEXT", "interrupted": "INTEGER NOT NULL DEFAULT 0",
                  "attempt": "INTEGER NOT NULL DEFAULT 0", "holder": "TEXT",
                  "heartbeat_at": "REAL"}
_ADDED_RUN_COLUMNS = {"provenance": "TEXT"}
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


class RecordStore:
    """One SQLite file; safe to use from several processes (each opens its own connection)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn: sqlite3.Connection | None = None
        self._beat: threading.Thread | None = None
        self._stop_beat = threading.Event()
        self._token = uuid.uuid4().hex[:12]
        _OPEN_STORES.add(self._token)
        self._connect().executescript(_SCHEMA)
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        for table, added in (("episodes", _ADDED_COLUMNS), ("runs", _ADDED_RUN_COLUMNS)):
            have = {row[1] for row in self._connect().execute(f"PRAGMA table_info({table})")}
            for name, kind in added.items():
                if name not in have:
                    self._connect().execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        return self._conn

    class _Tx:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, exc_type: Any, *_: Any) -> None:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")

    def _tx(self) -> "RecordStore._Tx":
        return RecordStore._Tx(self._connect())

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
        return {"path": self.path, "_conn": None, "_beat": None,
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
        with self._tx() as c:
            row = c.execute("SELECT plan_hash, provenance FROM runs WHERE run_id=?",
                            (run_id,)).fetchone()
            if row is not None:
                if row[0] != digest:
                    raise ValueError(f"run {run_id!r} exists in {self.path} with a different plan;"
                                     " use a new run id (plans are frozen)")
                if provenance is not None:
                    self._note_resumed(c, run_id, row[1], provenance)
                return run_id
            c.execute("INSERT INTO runs (run_id, created, plan_hash, config, provenance) "
                      "VALUES (?, ?, ?, ?, ?)",
                      (run_id, time.time(), digest, json.dumps(config, default=str),
                       None if provenance is None else json.dumps(provenance, default=str)))
            c.executemany(
                "INSERT INTO episodes (run_id, episode_id, benchmark, suite, task, episode_index,"
                " init_state_id, seed, policy, diagnostic) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(run_id, s.episode_id, s.benchmark, s.suite, s.task, s.episode_index,
                  s.init_state_id, s.seed, policy, int(diagnostic)) for s in sorted(plan)])
        return run_id

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
        recorded), in the order the runs were created."""
        rows = self._connect().execute(
            "SELECT run_id, config, provenance FROM runs ORDER BY created")
        return {run_id: {"config": json.loads(config),
                         "provenance": json.loads(provenance) if provenance else None}
                for run_id, config, provenance in rows}

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
        with self._tx() as c:
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
        with self._tx() as c:
            cur = c.execute(
                "UPDATE episodes SET status='finished', finished_at=?, success=?, terminal_step=?,"
                " steps=?, wall_s=?, error_kind=?, error_message=?, video_path=?, rollout_path=?,"
                " policy_calls=?, observations=?, decisions=?, rejections=?, termination=?,"
                " interactions_path=?"
                " WHERE run_id=? AND episode_id=? AND status='claimed'",
                (time.time(), int(result.success), result.terminal_step, result.steps,
                 result.wall_s, None if result.error_kind is None else result.error_kind.value,
                 result.error_message, result.video_path, result.rollout_path,
                 result.policy_calls, result.observations, result.decisions, result.rejections,
                 result.termination, result.interactions_path, run_id, episode_id))
            if cur.rowcount != 1:
                raise ValueError(f"episode {episode_id!r} of run {run_id!r} is not claimed; "
                                 "results are written once, to claimed episodes")
            c.execute("UPDATE attempts SET finished_at=?, outcome=? WHERE run_id=? AND "
                      "episode_id=? AND attempt=(SELECT attempt FROM episodes WHERE run_id=? "
                      "AND episode_id=?)",
                      (time.time(), outcome(result.success, result.error_kind, False),
                       run_id, episode_id, run_id, episode_id))

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
        with self._tx() as c:
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
        return ids

    def retry(self, run_id: str, episode_id: str, reason: str | None = None) -> None:
        """Make an interrupted or infrastructure-errored episode claimable once more, on
        the user's explicit request, recorded in ``retries``. A task success or failure,
        a policy error, or an episode not yet finished is refused: outcomes are never
        re-drawn."""
        with self._tx() as c:
            row = c.execute("SELECT status, success, error_kind, interrupted FROM episodes "
                            "WHERE run_id=? AND episode_id=?", (run_id, episode_id)).fetchone()
            if row is None:
                raise ValueError(f"no case {episode_id!r} in {run_id!r}")
            status, success, error_kind, interrupted = row
            previous = outcome(success, error_kind, interrupted) if status == "finished" \
                else status
            if status != "finished" or not (interrupted or error_kind == "infrastructure"):
                raise ValueError(
                    f"case {episode_id!r} is {previous}"
                    + (f" ({error_kind} error)" if previous == "errored" else "")
                    + "; only an interrupted or infrastructure-errored case may be retried")
            c.execute("INSERT INTO retries VALUES (?, ?, ?, ?, ?, ?)",
                      (run_id, episode_id, time.time(), self.holder, previous, reason))
            c.execute("UPDATE episodes SET status='planned', worker=NULL, claimed_at=NULL, "
                      "finished_at=NULL, success=NULL, terminal_step=NULL, steps=NULL, "
                      "wall_s=NULL, error_kind=NULL, error_message=NULL, video_path=NULL, "
                      "rollout_path=NULL, policy_calls=NULL, observations=NULL, decisions=NULL,"
                      " rejections=NULL, termination=NULL, interactions_path=NULL, "
                      "interrupted=0, holder=NULL, heartbeat_at=NULL "
                      "WHERE run_id=? AND episode_id=?", (run_id, episode_id))

    # -- campaigns --------------------------------------------------------------
    def create_campaign(self, campaign_id: str, manifest: dict[str, Any]) -> None:
        """Store a campaign's frozen manifest; refuses an id that exists."""
        with self._tx() as c:
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
        with self._tx() as c:
            c.execute("INSERT INTO searches VALUES (?, ?, ?)",
                      (run_id, time.time(), json.dumps(search, default=str)))

    def searches(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The searches recorded (for ``run_id``, or all), oldest first, each with its
        ``run_id``."""
        query, args = "SELECT run_id, search FROM searches", ()
        if run_id is not None:
            query, args = query + " WHERE run_id=?", (run_id,)
        rows = self._connect().execute(query + " ORDER BY created", args).fetchall()
        return [{"run_id": rid, **json.loads(text)} for rid, text in rows]

    def record_judge_stats(self, label: str, judge: str, stats: dict[str, Any]) -> None:
        """Keep a judge's accounting (requests, tokens, retries, frames per request, ...)
        for one ranking, named ``label``, beside the episodes it judged."""
        with self._tx() as c:
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
        """Per-episode rows (all runs, or one) as a DataFrame."""
        query, args = "SELECT * FROM episodes", ()
        if run_id is not None:
            query, args = query + " WHERE run_id=?", (run_id,)
        df = pd.read_sql_query(query + " ORDER BY run_id, episode_id", self._connect(),
                               params=args)
        df["success"] = df["success"].astype("boolean")
        df["diagnostic"] = df["diagnostic"].astype(bool)
        return df

    def iter_json(self, run_id: str | None = None) -> Iterator[dict[str, Any]]:
        """One JSON-ready dict per episode: task, episode, success, terminal_step, steps,
        policy_calls, error, worker, ..."""
        for row in self.results(run_id).to_dict("records"):
            yield {
                "run_id": row["run_id"], "episode_id": row["episode_id"], "task": row["task"],
                "episode": int(row["episode_index"]), "init_state_id": int(row["init_state_id"]),
                "policy": row["policy"], "status": row["status"],
                "success": None if pd.isna(row["success"]) else bool(row["success"]),
                "terminal_step": _int_or_none(row["terminal_step"]),
                "steps": _int_or_none(row["steps"]), "wall_s": _float_or_none(row["wall_s"]),
                "policy_calls": _int_or_none(row["policy_calls"]),
                "observations": _int_or_none(row["observations"]),
                "decisions": _int_or_none(row["decisions"]),
                "rejections": _int_or_none(row["rejections"]),
                "termination": row["termination"], "interrupted": bool(row["interrupted"]),
                "attempt": int(row["attempt"]), "worker": row["worker"],
                "error": None if row["error_kind"] is None else
                {"kind": row["error_kind"], "message": row["error_message"]},
                "diagnostic": bool(row["diagnostic"]),
            }


def load_results(path: str | os.PathLike, run_id: str | None = None) -> pd.DataFrame:
    """Per-episode results of a records file as a DataFrame."""
    if not Path(path).exists():
        raise FileNotFoundError(f"no records file at {path}")
    store = RecordStore(path)
    try:
        return store.results(run_id)
    finally:
        store.close()


def _int_or_none(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _float_or_none(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
