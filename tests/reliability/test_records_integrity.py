"""Records that refuse to be silently wrong, through the real command line on real
SQLite files: a file that is not a records file, is damaged, truncated, edited,
read-only or on a full disk is one line naming it and what is wrong (exit 2 before a
run, 1 during one), and nothing in it is overwritten or re-run; ``results`` and
``report`` read a damaged file as far as it can be read and say what is missing."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess

import pytest
import yaml

from tally import note, refused, workbench

CONFIG = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=3,
              max_steps=4, image_size=32, progress=False, policy="zero")


def config_file(tmp_path, out, **changes):
    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "output_dir": str(out), **changes}))
    return str(path)


def digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A finished 3-episode run, recorded by the real command line (copy before use)."""
    root = tmp_path_factory.mktemp("recorded")
    done = workbench("eval", config_file(root, root / "run"))
    assert done.rc == 0, done.stderr
    return root / "run"


def copy_of(recorded, tmp_path):
    target = tmp_path / "run"
    shutil.copytree(recorded, target)
    return target


def sql(db, *statements):
    conn = sqlite3.connect(db)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("what,make,says", [
    ("a folder", lambda p: p.mkdir(), "is a folder"),
    ("garbage bytes", lambda p: p.write_bytes(os.urandom(5000)), "is not an SQLite database"),
    ("a text file", lambda p: p.write_text("task,success\nreach,1\n"),
     "is not an SQLite database"),
    ("someone else's database", lambda p: sql(p, "CREATE TABLE customers (name TEXT)"),
     "is not a workbench records file (it holds customers)"),
    ("episodes as a view", lambda p: sql(p, "CREATE TABLE runs (run_id TEXT, plan_hash TEXT,"
                                            " config TEXT)",
                                         "CREATE VIEW episodes AS SELECT * FROM runs"),
     "'episodes' is a view, not a table"),
    ("a wrong schema", lambda p: sql(p, "CREATE TABLE episodes (run_id TEXT, x INTEGER)"),
     "table episodes lacks episode_id, error_kind, status, success, task"),
    ("a newer schema", lambda p: sql(p, "CREATE TABLE runs (run_id TEXT, plan_hash TEXT, "
                                        "config TEXT)", "PRAGMA user_version=99"),
     "written by a newer workbench (schema 99"),
])
def test_a_file_that_is_not_sound_records_is_refused_by_every_command(tmp_path, what, make,
                                                                      says):
    out = tmp_path / "run"
    out.mkdir()
    db = out / "records.sqlite"
    make(db)
    before = digest(db) if db.is_file() else None
    for command in (["eval", config_file(tmp_path, out)], ["results", str(db)],
                    ["results", str(db), "--json"], ["report", str(db)]):
        refused(workbench(*command), f"records file {what}: {command[0]}", str(db))
    assert (digest(db) if db.is_file() else None) == before  # nothing written
    assert not (out / "rollouts").exists()


def test_a_damaged_file_is_read_as_far_as_it_can_be_and_never_run_on(tmp_path):
    out = tmp_path / "big"
    out.mkdir()
    db = out / "records.sqlite"
    subprocess.run([os.sys.executable, "-c", BIG, str(db)], check=True)
    size = db.stat().st_size
    with open(db, "r+b") as f:  # one stretch of pages in the middle overwritten
        f.seek(size // 2)
        f.write(os.urandom(8192))
    before = digest(db)
    refused(workbench("eval", config_file(tmp_path, out)), "damaged file: eval",
            f"records file {db} is damaged (integrity check:")
    assert digest(db) == before
    shown = workbench("results", str(db))
    assert shown.rc == 1 and "Traceback" not in shown.stderr, shown.stderr
    assert "damaged (integrity check:" in shown.stderr
    read = [line for line in shown.stdout.splitlines() if line.split()[:1] == ["ALL"]]
    episodes = int(read[0].split()[1])
    assert 300 <= episodes < 400, shown.stdout  # most rows read, a page's worth lost
    assert f"{episodes} read, {400 - episodes} lost" in shown.stderr
    reported = workbench("report", str(db), "--out", str(tmp_path / "report"))
    assert reported.rc == 1 and "Traceback" not in reported.stderr, reported.stderr
    page = (tmp_path / "report" / "report.html").read_text()
    assert "id='records-problems'" in page and f"{400 - episodes} lost" in page
    note("damaged file: results and report read what remains", "accepted as documented")


BIG = """
import sys
from workbench.records.store import RecordStore
from workbench.contracts.plan import plan_episodes
from workbench.contracts.results import EpisodeResult
store = RecordStore(sys.argv[1])
plan = plan_episodes("metaworld", "MT10", ["reach-v3", "push-v3"], 200)
store.create_run("big", plan, {"policy": "zero"})
for i, s in enumerate(sorted(plan)):
    store.claim("big", s.episode_id, "w")
    store.finish("big", s.episode_id, EpisodeResult(success=i % 3 == 0, terminal_step=None,
                                                    steps=5, wall_s=0.1, error_message="x" * 200))
store.close()
"""


def test_a_truncated_file_is_damaged_and_an_emptied_one_is_not_taken_for_new(recorded,
                                                                            tmp_path):
    run = copy_of(recorded, tmp_path)
    db = run / "records.sqlite"
    for side in run.glob("records.sqlite-*"):
        side.unlink()
    half = db.stat().st_size // 2
    os.truncate(db, half)
    refused(workbench("eval", config_file(tmp_path, run)), "truncated file: eval",
            f"records file {db} cannot be opened: it is damaged")
    assert db.stat().st_size == half
    shown = workbench("results", str(db))
    assert shown.rc == 1 and "Traceback" not in shown.stderr and "damaged" in shown.stderr
    os.truncate(db, 0)
    refused(workbench("eval", config_file(tmp_path, run)), "emptied file: eval",
            "is empty (0 bytes) but its folder holds rollouts")
    assert db.stat().st_size == 0 and len(list((run / "rollouts").iterdir())) == 3
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "records.sqlite").touch()  # an empty file in a folder no run wrote to: new
    assert workbench("eval", config_file(tmp_path, fresh, episodes=1)).rc == 0


@pytest.mark.parametrize("what,edit,says", [
    ("a finished row deleted", "DELETE FROM episodes WHERE episode_id LIKE '%/0001'",
     "the plan has 3 cases, 2 rows remain (metaworld/MT10/reach-v3/0001); 3 finished "
     "episodes were recorded, 2 remain finished"),
    ("a finished row reset to planned", "UPDATE episodes SET status='planned' WHERE "
     "episode_id LIKE '%/0002'", "3 finished episodes were recorded, 2 remain finished"),
    ("a failure edited into a success", "UPDATE episodes SET success=1 WHERE episode_id "
     "LIKE '%/0000'", "a finished episode's recorded outcome was changed"),
    ("garbage in a row", "UPDATE episodes SET steps='lots' WHERE episode_id LIKE '%/0002'",
     "a finished episode's recorded outcome was changed"),
])
def test_an_edited_run_is_reported_and_never_re_run(recorded, tmp_path, what, edit, says):
    run = copy_of(recorded, tmp_path)
    db = run / "records.sqlite"
    sql(db, edit)
    config = config_file(tmp_path, run)
    refused(workbench("eval", config), f"{what}: eval", says)
    conn = sqlite3.connect(db)
    attempts = conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
    conn.close()
    assert attempts == 3  # nothing claimed again
    shown = workbench("results", str(db))
    assert shown.rc == 1 and "Traceback" not in shown.stderr, shown.stderr
    assert says.split(" (")[0].split("; ")[0] in shown.stderr
    if what == "garbage in a row":
        assert "metaworld/MT10/reach-v3/0002: steps holds 'lots'" in shown.stderr
        rows = workbench("results", str(db), "--json")
        assert rows.rc == 1 and '"steps": null' in rows.stdout
    note(f"{what}: results say what is wrong", "accepted as documented")


def _can_mount() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


def test_a_read_only_file_with_work_pending_is_one_line(recorded, tmp_path):
    run = copy_of(recorded, tmp_path)
    db = run / "records.sqlite"
    before = digest(db)
    config = config_file(tmp_path, run, episodes=5)  # two more cases than recorded
    if os.geteuid() != 0:
        db.chmod(0o444)
        wrap = None
    elif _can_mount():  # root writes through permissions: a read-only mount instead
        wrap = ["unshare", "-m", "sh", "-c",
                f"mount --bind {run} {run} && mount -o remount,bind,ro {run} && exec"]
    else:
        pytest.skip("running as root without mount namespaces: nothing can make a file "
                    "read-only here")
    refused(workbench("eval", config, wrap=wrap), "read-only records: eval",
            f"records file {db} is read-only")
    assert digest(db) == before
    shown = workbench("results", str(db), wrap=wrap)
    assert shown.rc == 0 and "ALL" in shown.stdout, shown.stderr


@pytest.mark.skipif(not _can_mount(), reason="a small full disk needs a mount namespace")
def test_a_full_disk_stops_the_run_in_one_line_and_keeps_what_was_recorded(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    run = disk / "run"
    config = config_file(tmp_path, run, episodes=40)
    keep = tmp_path / "kept"
    wrap = ["unshare", "-m", "sh", "-c",
            f"mount -t tmpfs -o size=300k tmpfs {disk} && trap 'cp -r {run} {keep}' EXIT; "]
    line = refused(workbench("eval", config, wrap=wrap), "full disk: eval",
                   "the disk is full; the run stopped, what was recorded stays recorded",
                   code=1)
    assert f"records file {run / 'records.sqlite'}: cannot " in line
    conn = sqlite3.connect(keep / "records.sqlite")
    assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finished = conn.execute("SELECT count(*) FROM episodes WHERE status='finished'").fetchone()
    conn.close()
    assert 1 <= finished[0] < 40
    resumed = workbench("eval", config_file(tmp_path, keep, episodes=40))
    assert resumed.rc == 0, resumed.stderr  # room again: the rest runs, nothing twice
    conn = sqlite3.connect(keep / "records.sqlite")
    assert conn.execute("SELECT max(attempt) FROM episodes").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM episodes WHERE status='finished'").fetchone()[0] \
        == 40
    conn.close()
