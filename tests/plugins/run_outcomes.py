"""What two runs of one plan must agree on, episode by episode, and what a live run's
records hold while it runs."""

import os
import sqlite3
import time

import pandas as pd


def outcomes(df: pd.DataFrame) -> dict[str, tuple]:
    """episode_id -> (success, terminal step or None, steps) of a results table."""
    return {r.episode_id: (bool(r.success), None if pd.isna(r.terminal_step)
                           else int(r.terminal_step), int(r.steps)) for r in df.itertuples()}


def _query(db, sql, params=()):
    """Rows of ``sql`` on the live records at ``db``; none while the driver has not yet
    created the file or its episodes table (it may be polled between the two)."""
    if not os.path.exists(db):
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name='episodes'").fetchone():
            return []
        return conn.execute(sql, params).fetchall()


def claimed(db, pattern="%"):
    """Episodes claimed and not finished in ``db`` whose worker matches ``pattern``."""
    rows = _query(db, "SELECT count(*) FROM episodes WHERE status='claimed' "
                      "AND worker LIKE ?", (pattern,))
    return rows[0][0] if rows else 0


def finished(db):
    return _query(db, "SELECT episode_id, finished_at, steps FROM episodes "
                      "WHERE status='finished' ORDER BY episode_id")


def wait_for(condition, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def run_killing_worker_0(config, held):
    """``workbench.run(config)`` on a pool whose worker 0 is SIGKILLed once the records
    show it holding ``held`` claimed episodes (a fixed delay may hit warm-up)."""
    import signal
    import threading

    import workbench

    db = os.path.join(config["output_dir"], "records.sqlite")
    with workbench.open_pool(config) as pool:
        victim = pool.workers[0].process.pid

        def kill_worker_0():
            wait_for(lambda: claimed(db, "worker-0") >= held)
            os.kill(victim, signal.SIGKILL)

        killer = threading.Thread(target=kill_worker_0)
        killer.start()
        result = workbench.run(config, pool=pool)
        killer.join()
    return result
