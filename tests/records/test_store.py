import multiprocessing as mp
import sqlite3

import pytest

from workbench.contracts import EpisodeResult, ErrorKind, plan_episodes, shard_episodes
from workbench.records import RecordStore, load_results

PLAN = plan_episodes("metaworld", "MT10", ["push-v3", "reach-v3"], 3)


def store(tmp_path):
    s = RecordStore(tmp_path / "r.sqlite")
    s.create_run("run", PLAN, {"policy": "p"})
    return s


def test_plan_is_frozen_and_wal_is_on(tmp_path):
    s = store(tmp_path)
    assert s.create_run("run", list(reversed(PLAN)), {}) == "run"  # same plan: reopen
    with pytest.raises(ValueError, match="different plan"):
        s.create_run("run", PLAN[:2], {})
    assert sqlite3.connect(s.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert len(s.pending("run")) == 6


def test_claim_once_finish_once(tmp_path):
    s = store(tmp_path)
    eid = PLAN[0].episode_id
    with pytest.raises(ValueError, match="not claimed"):
        s.finish("run", eid, EpisodeResult(True, 5, 5, 0.1))
    assert s.claim("run", eid, "w0") and not s.claim("run", eid, "w1")
    s.finish("run", eid, EpisodeResult(True, 5, 5, 0.1))
    with pytest.raises(ValueError, match="not claimed"):
        s.finish("run", eid, EpisodeResult(False, None, 9, 0.1))
    row = s.results("run").set_index("episode_id").loc[eid]
    assert row["success"] and row["terminal_step"] == 5 and row["worker"] == "w0"


def test_recover_marks_crashed_claims_as_infrastructure_errors(tmp_path):
    s = store(tmp_path)
    s.claim("run", PLAN[1].episode_id, "w0")
    s.close()
    again = RecordStore(tmp_path / "r.sqlite")  # a new process after the crash
    assert again.recover("run") == [PLAN[1].episode_id]
    row = again.results("run").set_index("episode_id").loc[PLAN[1].episode_id]
    assert row["status"] == "finished" and row["error_kind"] == "infrastructure"
    assert "not retried" in row["error_message"]
    assert PLAN[1].episode_id not in again.pending("run")


def test_error_kinds_are_checked_and_stored_as_their_names(tmp_path):
    with pytest.raises(ValueError, match="error_kind"):
        EpisodeResult(False, None, 0, 0.0, "oops")
    s = store(tmp_path)
    s.claim("run", PLAN[0].episode_id, "w0")
    s.finish("run", PLAN[0].episode_id, EpisodeResult(False, None, 3, 0.1, ErrorKind.POLICY, "x",
                                                      policy_calls=3, observations=3))
    row = s.results("run").set_index("episode_id").loc[PLAN[0].episode_id]
    assert row["error_kind"] == "policy" and row["policy_calls"] == 3


def test_a_records_file_from_before_the_usage_columns_gains_them(tmp_path):
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript("""CREATE TABLE episodes (run_id TEXT, episode_id TEXT, benchmark TEXT,
        suite TEXT, task TEXT, episode_index INTEGER, init_state_id INTEGER, seed INTEGER,
        policy TEXT, diagnostic INTEGER, status TEXT DEFAULT 'planned', worker TEXT, claimed_at REAL,
        finished_at REAL, success INTEGER, terminal_step INTEGER, steps INTEGER, wall_s REAL,
        error_kind TEXT, error_message TEXT, video_path TEXT, rollout_path TEXT,
        PRIMARY KEY (run_id, episode_id));""")
    old.close()
    s = RecordStore(path)
    s.create_run("run", PLAN, {})
    s.claim("run", PLAN[0].episode_id, "w0")
    s.finish("run", PLAN[0].episode_id, EpisodeResult(True, 4, 4, 0.1, policy_calls=1))
    assert s.results("run")["policy_calls"].max() == 1


def test_a_run_keeps_where_it_was_made_and_notes_each_resume_on_other_code(tmp_path):
    s = RecordStore(tmp_path / "r.sqlite")
    made = {"workbench_version": "0.1.0", "commit": "a" * 40, "dirty": False,
            "python": "3.11.7", "platform": "Linux", "host": "h1", "recorded": "t0"}
    s.create_run("run", PLAN, {}, provenance=made)
    s.create_run("run", PLAN, {}, provenance=made | {"recorded": "t1"})  # same code: nothing
    assert s.provenance("run") == made
    later = made | {"commit": "b" * 40, "dirty": True}
    s.create_run("run", PLAN, {}, provenance=later | {"recorded": "t2"})
    s.create_run("run", PLAN, {}, provenance=later | {"recorded": "t3"})  # as the last: nothing
    s.create_run("run", PLAN, {}, provenance=made | {"host": "h2", "recorded": "t4"})
    kept = s.provenance("run")
    assert {k: v for k, v in kept.items() if k != "resumed"} == made
    assert [(r["commit"][0], r["host"], r["recorded"]) for r in kept["resumed"]] == \
        [("b", "h1", "t2"), ("a", "h2", "t4")]
    s.create_run("other", PLAN, {})
    assert s.provenance("other") is None
    assert s.run_details() == {"run": {"config": {}, "provenance": kept},
                               "other": {"config": {}, "provenance": None}}


def _claim_all(path, worker, queue):
    s = RecordStore(path)
    queue.put([e.episode_id for e in PLAN if s.claim("run", e.episode_id, worker)])


def test_concurrent_processes_claim_each_episode_exactly_once(tmp_path):
    store(tmp_path).close()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(tmp_path / "r.sqlite", f"w{i}", queue))
             for i in range(3)]
    for p in procs:
        p.start()
    claimed = [e for _ in procs for e in queue.get(timeout=60)]
    for p in procs:
        p.join()
    assert sorted(claimed) == sorted(e.episode_id for e in PLAN)


def test_load_results_refuses_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no records file"):
        load_results(tmp_path / "missing.sqlite")


def test_sharding_partitions_the_plan():
    shards = [shard_episodes(PLAN, 4, k) for k in range(4)]
    assert sorted(e for s in shards for e in s) == sorted(PLAN)
    with pytest.raises(ValueError, match="shard: expected in"):
        shard_episodes(PLAN, 2, 2)
