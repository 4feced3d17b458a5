"""workbench compare through the real CLI, on real MetaWorld: a policy against itself stays
undecided within its budget, a clearly worse one is decided long before it, and a
comparison SIGKILLed mid-way resumes to the same decisions with no episode run twice."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

from workbench.ranking.sequential import budget_threshold

CONFIG = {"benchmark": "metaworld", "suite": "MT1:reach-v3", "episodes": 16, "policy": "zero",
          "image_size": 32, "max_steps": 60}


def write(tmp_path, name, **changes):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "output_dir": str(tmp_path / name), **changes}))
    return path


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "workbench.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600, **kw)


def pairs(done):
    assert done.returncode == 0, done.stderr
    return {(p["a"], p["b"]): p for p in map(json.loads, done.stdout.splitlines())}


def episodes_run(folder):
    """(episode_id, attempt, status, error_kind) of every episode each policy's records
    hold, all runs."""
    out = {}
    for db in folder.glob("*/records.sqlite"):
        with sqlite3.connect(db) as con:
            out[db.parent.name] = con.execute(
                "SELECT episode_id, attempt, status, error_kind FROM episodes").fetchall()
    return out


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cmp")
    done = cli("compare", write(tmp, "whole"), "--policies", "expert", "zero", "same=zero",
               "--json")
    return pairs(done), tmp / "whole"


def test_a_clearly_worse_policy_is_decided_long_before_the_budget(uninterrupted):
    found, _ = uninterrupted
    for worse in ("zero", "same"):
        pair = found[("expert", worse)]
        assert pair["decided"] and pair["winner"] == "expert"
        assert pair["episodes"] <= 9 < pair["budget"] == 16
        # the exact threshold for a budget of 16 paired episodes at 0.05 / 3 per pair, not
        # Ville's 1 / (0.05 / 3) = 60 (that is --open-ended)
        assert pair["statistic"] >= pair["threshold"]
        assert pair["threshold"] == pytest.approx(budget_threshold(16, 0.05 / 3))
        assert pair["threshold"] < 60


def test_open_ended_keeps_ville_threshold(tmp_path):
    done = cli("compare", write(tmp_path, "open"), "--policies", "expert", "zero",
               "--open-ended", "--json")
    (pair,) = pairs(done).values()
    assert pair["threshold"] == pytest.approx(20.0)  # 1 / 0.05, one pair
    assert budget_threshold(16, 0.05) < 20.0  # what the default would have used
    assert pair["decided"] and pair["winner"] == "expert" and pair["statistic"] >= 20.0


def test_every_decision_is_in_the_records_with_its_settings(uninterrupted):
    found, folder = uninterrupted
    with sqlite3.connect(folder / "comparison.sqlite") as con:
        rows = con.execute("SELECT a, b, round, episodes, statistic, threshold, winner "
                           "FROM decisions ORDER BY a, b").fetchall()
        settings = dict(con.execute("SELECT key, value FROM comparison"))
        rounds = con.execute("SELECT count(*) FROM rounds").fetchone()[0]
    decided = sorted(k for k, v in found.items() if v["decided"])
    assert [(a, b) for a, b, *_ in rows] == decided
    for a, b, round_, episodes, statistic, threshold, winner in rows:
        pair = found[(a, b)]
        assert (round_, episodes, winner) == (pair["round"], pair["episodes"], pair["winner"])
        assert statistic == pytest.approx(pair["statistic"]) and threshold == pair["threshold"]
    assert json.loads(settings["alpha"]) == 0.05 and json.loads(settings["max_episodes"]) == 16
    assert json.loads(settings["success_test"]) == "discordant-beta-mixture-0.25"
    assert rounds == 16  # the undecided pair ran the whole budget


def test_a_policy_against_a_copy_of_itself_stays_undecided_within_its_budget(uninterrupted):
    found, folder = uninterrupted
    pair = found[("zero", "same")]
    assert not pair["decided"] and pair["winner"] is None
    assert pair["episodes"] == pair["budget"] == 16
    recorded = episodes_run(folder)
    assert len(recorded["zero"]) == len(recorded["same"]) == 16  # ran the whole budget
    assert len(recorded["expert"]) == pair["episodes"] - 16 + found[("expert", "zero")][
        "episodes"]  # expert stopped once both its pairs were decided
    assert (folder / "comparison.html").read_text().count("undecided after 16") == 1


def test_killed_mid_comparison_it_resumes_to_the_same_decisions_running_nothing_twice(
        uninterrupted, tmp_path):
    whole, _ = uninterrupted
    path = write(tmp_path, "killed")
    args = [sys.executable, "-m", "workbench.cli", "compare", str(path), "--policies",
            "expert", "zero", "same=zero", "--json"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    ledger = tmp_path / "killed" / "comparison.sqlite"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(ledger) as con:
                if con.execute("SELECT count(*) FROM rounds").fetchone()[0] >= 3:
                    break
        except sqlite3.OperationalError:  # not made yet, or its tables not yet
            pass
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # between rounds: the next round's run is starting
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with sqlite3.connect(ledger) as con:
        rounds_before = con.execute("SELECT count(*) FROM rounds").fetchone()[0]
    assert 3 <= rounds_before < 16  # killed mid-way
    resumed = pairs(cli(*args[3:]))
    recorded = episodes_run(tmp_path / "killed")
    lost = {}
    for label, rows in recorded.items():
        ids = [r[0] for r in rows]
        assert len(ids) == len(set(ids)), label  # no episode planned twice
        assert all(status == "finished" and attempt == 1 for _, attempt, status, _ in rows)
        # the episode in flight at the kill (if the kill landed in one) is the harness's
        # error, recorded, never run again
        lost[label] = sum(kind == "infrastructure" for *_, kind in rows)
        assert lost[label] <= 1, label
    for key, pair in whole.items():
        again = resumed[key]
        assert (again["decided"], again["winner"]) == (pair["decided"], pair["winner"]), key
        missing = lost.get(key[0], 0) + lost.get(key[1], 0)
        if pair["decided"]:  # the same number of paired episodes decided it
            assert again["episodes"] == pair["episodes"], key
        else:  # the budget, less a paired episode lost to the kill
            assert pair["episodes"] - missing <= again["episodes"] <= pair["episodes"], key


def test_resuming_with_other_settings_is_refused(uninterrupted, tmp_path):
    _, folder = uninterrupted
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "output_dir": str(folder)}))
    done = cli("compare", path, "--policies", "expert", "zero", "same=zero", "--alpha", "0.1")
    assert done.returncode == 2
    assert "expected the settings this comparison began with" in done.stderr
    assert "alpha" in done.stderr and "Traceback" not in done.stderr


def test_a_comparison_begun_under_another_success_test_is_not_resumed_under_this_one(
        uninterrupted, tmp_path):
    # a copy of the comparison's records as an earlier version wrote them (its test, the
    # KT mixture, named): resuming is refused, naming the setting, and nothing is run
    _, folder = uninterrupted
    copy = tmp_path / "older"
    shutil.copytree(folder, copy)
    with sqlite3.connect(copy / "comparison.sqlite") as con:
        con.execute("UPDATE comparison SET value = ? WHERE key = 'success_test'",
                    (json.dumps("discordant-beta-mixture-0.5"),))
    before = {p: p.stat().st_mtime_ns for p in copy.rglob("records.sqlite")}
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "output_dir": str(copy)}))
    done = cli("compare", path, "--policies", "expert", "zero", "same=zero")
    assert done.returncode == 2 and "success_test" in done.stderr, done.stderr
    assert {p: p.stat().st_mtime_ns for p in copy.rglob("records.sqlite")} == before


@pytest.mark.parametrize("extra, message", [
    (["--policies", "zero"], "policies: expected two or more"),
    (["--policies", "zero", "zero"], "of distinct labels"),
    (["--policies", "zero", "=zero"], "expected REFERENCE or LABEL=REFERENCE"),
    (["--policies", "zero", "expert", "--alpha", "1.5"], "alpha: expected a number in (0, 1)"),
    (["--policies", "zero", "expert", "--alpha", "nan"], "alpha: expected a number in (0, 1)"),
    (["--policies", "zero", "expert", "--round-episodes", "0"], "round_episodes: expected an"),
    (["--policies", "zero", "expert", "--max-episodes", "60"], "episodes: expected at most 50"),
    (["--policies", "zero", "expert", "--max-episodes", "15", "--round-episodes", "2"],
     "max_episodes: expected a positive multiple"),
    (["--policies", "zero", "nosuch"], "unknown policy 'nosuch'"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, extra, message):
    done = cli("compare", write(tmp_path, "bad"), *extra)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_progress_gives_partial_credit_and_decides_what_success_cannot(tmp_path):
    """Both policies fail every episode (the step limit is too short to succeed), so success
    never tells them apart; MetaWorld's progress (its shaped reward) does."""
    from workbench.ranking.sequential import decide
    from workbench.records import load_results

    path = write(tmp_path, "progress", max_steps=20)
    found = pairs(cli("compare", path, "--policies", "expert", "zero", "--metric", "progress",
                      "--json"))[("expert", "zero")]
    assert found["decided"] and found["winner"] == "expert" and found["episodes"] < 16
    success = [load_results(tmp_path / "progress" / p / "records.sqlite")
               .sort_values("episode_id")["success"].astype(float).tolist()
               for p in ("expert", "zero")]
    assert sum(success[0]) == sum(success[1]) == 0  # no success on either side
    assert not decide(*success).decided  # so success cannot decide, at any budget


def test_progress_is_refused_where_the_benchmark_declares_none(tmp_path):
    from workbench.comparison import compare
    from workbench.errors import ConfigError

    with pytest.raises(ConfigError, match="aloha, which declares none"):
        compare({"benchmark": "aloha", "suite": "sim", "policy": "zero", "episodes": 2,
                 "output_dir": str(tmp_path / "aloha")}, ["zero", "b=zero"], metric="progress")
    assert not (tmp_path / "aloha").exists()


def test_a_damaged_comparison_file_is_one_line_and_nothing_runs(tmp_path):
    path = write(tmp_path, "damaged")
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "comparison.sqlite").write_bytes(b"not a database" * 100)
    done = cli("compare", path, "--policies", "expert", "zero")
    assert done.returncode == 2 and "expected a comparison's records" in done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "damaged" / "expert").exists()

