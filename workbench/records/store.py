"""Durable per-episode records in SQLite (WAL mode), one file per run or campaign.

A run holds a frozen plan: every planned episode is a row from the start, with a
status that only moves forward: ``planned`` -> ``claimed`` -> ``finished``. A claim
succeeds once; an episode left ``claimed`` by a crash is never silently retried:
:meth:`RecordStore.recover` marks it finished with an infrastructure error.

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

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd

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
"""
# columns added after the first release, with their types (older files gain them on open)
_ADDED_COLUMNS = {"policy_calls": "INTEGER", "observations": "INTEGER"}


def plan_hash(plan: Sequence[EpisodeSpec]) -> str:
    text = "\n".join(s.episode_id for s in sorted(plan))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class RecordStore:
    """One SQLite file; safe to use from several processes (each opens its own connection)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn: sqlite3.Connection | None = None
        self._connect().executescript(_SCHEMA)
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        have = {row[1] for row in self._connect().execute("PRAGMA table_info(episodes)")}
        for name, kind in _ADDED_COLUMNS.items():
            if name not in have:
                self._connect().execute(f"ALTER TABLE episodes ADD COLUMN {name} {kind}")

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

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __getstate__(self) -> dict:  # picklable for worker processes: reconnect there
        return {"path": self.path, "_conn": None}

    # -- plan -------------------------------------------------------------------
    def create_run(self, run_id: str, plan: Sequence[EpisodeSpec], config: dict[str, Any],
                   policy: str | None = None, diagnostic: bool = False) -> str:
        """Freeze ``plan`` under ``run_id``. Re-opening a run with a different plan is refused."""
        digest = plan_hash(plan)
        policy = policy or str(config.get("policy", "policy"))
        with self._tx() as c:
            row = c.execute("SELECT plan_hash FROM runs WHERE run_id=?", (run_id,)).fetchone()
            if row is not None:
                if row[0] != digest:
                    raise ValueError(f"run {run_id!r} exists in {self.path} with a different plan;"
                                     " use a new run id (plans are frozen)")
                return run_id
            c.execute("INSERT INTO runs VALUES (?, ?, ?, ?)",
                      (run_id, time.time(), digest, json.dumps(config, default=str)))
            c.executemany(
                "INSERT INTO episodes (run_id, episode_id, benchmark, suite, task, episode_index,"
                " init_state_id, seed, policy, diagnostic) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(run_id, s.episode_id, s.benchmark, s.suite, s.task, s.episode_index,
                  s.init_state_id, s.seed, policy, int(diagnostic)) for s in sorted(plan)])
        return run_id

    def pending(self, run_id: str) -> list[str]:
        """Episode ids still ``planned`` (never claimed), in canonical order."""
        rows = self._connect().execute(
            "SELECT episode_id FROM episodes WHERE run_id=? AND status='planned' "
            "ORDER BY episode_id", (run_id,)).fetchall()
        return [r[0] for r in rows]

    # -- claims and results -----------------------------------------------------
    def claim(self, run_id: str, episode_id: str, worker: str) -> bool:
        """Claim a planned episode; ``False`` if it was already claimed or finished."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE episodes SET status='claimed', worker=?, claimed_at=? "
                "WHERE run_id=? AND episode_id=? AND status='planned'",
                (worker, time.time(), run_id, episode_id))
            return cur.rowcount == 1

    def finish(self, run_id: str, episode_id: str, result: EpisodeResult) -> None:
        """Record a claimed episode's result; refuses to overwrite a finished one."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE episodes SET status='finished', finished_at=?, success=?, terminal_step=?,"
                " steps=?, wall_s=?, error_kind=?, error_message=?, video_path=?, rollout_path=?,"
                " policy_calls=?, observations=?"
                " WHERE run_id=? AND episode_id=? AND status='claimed'",
                (time.time(), int(result.success), result.terminal_step, result.steps,
                 result.wall_s, None if result.error_kind is None else result.error_kind.value,
                 result.error_message, result.video_path, result.rollout_path,
                 result.policy_calls, result.observations, run_id, episode_id))
            if cur.rowcount != 1:
                raise ValueError(f"episode {episode_id!r} of run {run_id!r} is not claimed; "
                                 "results are written once, to claimed episodes")

    def recover(self, run_id: str, reason: str = "claimed but never finished") -> list[str]:
        """Mark episodes stuck in ``claimed`` (a crash) as infrastructure errors; never retried."""
        with self._tx() as c:
            ids = [r[0] for r in c.execute(
                "SELECT episode_id FROM episodes WHERE run_id=? AND status='claimed'",
                (run_id,))]
            c.execute(
                "UPDATE episodes SET status='finished', finished_at=?, success=0, steps=0,"
                " error_kind=?, error_message=? WHERE run_id=? AND status='claimed'",
                (time.time(), ErrorKind.INFRASTRUCTURE.value,
                 f"interrupted: {reason} (not retried)", run_id))
        return ids

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
                "observations": _int_or_none(row["observations"]), "worker": row["worker"],
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
