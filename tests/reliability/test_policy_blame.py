"""A policy cannot excuse itself: whatever its code does (sys.exit, os._exit, a
MemoryError, an InfrastructureError of its own, an exception whose message cannot be
read, a 20 MB message, a call that never returns) is that episode's policy failure, on
every backend; the other episodes run, everything is recorded, and every runtime unloads
the policy."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import workbench
from workbench.contracts.results import MAX_MESSAGE_CHARS, PolicyLoadFailed
from workbench.errors import ConfigError

# episode index -> misbehaviour, and what its recorded message says (any of the texts:
# the pool's replica reports its own traceback)
HOWS = ["none", "sys_exit", "os_exit", "memory", "infrastructure", "hostile_str", "huge"]
SAYS = {"sys_exit": ("the policy called sys.exit(3)",),
        "os_exit": ("the policy called os._exit(4)",),
        "memory": ("MemoryError: the policy's own allocation",),
        "infrastructure": ("InfrastructureError: not my fault, says the policy",),
        "hostile_str": ("HostileStr: (its message could not be read: ValueError)",
                        "HostileStr: <exception str() failed>"),
        "huge": ("[cut: ",)}
BASE = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=len(HOWS),
            max_steps=12, image_size=32, progress=False, policy="hostile_policies:Misbehaves",
            policy_call_timeout_s=2.0)


def episode(k: int) -> str:
    return f"metaworld/MT10/reach-v3/{k:04d}"


@pytest.mark.parametrize("backend", ["sequential", "pool"])
def test_whatever_the_policys_code_does_is_its_own_failure(tmp_path, backend):
    unloaded = tmp_path / "unloaded"
    run = workbench.run(BASE | {"backend": backend, "pool": {"workers": 2},
                                "output_dir": str(tmp_path / "run"),
                                "policy_options": {"hows": HOWS, "unloaded_to": str(unloaded)}})
    df = run.results.set_index("episode_id")
    assert pd.isna(df.loc[episode(0), "error_kind"]) and df.loc[episode(0), "steps"] == 12
    for k, how in enumerate(HOWS[1:], start=1):
        row = df.loc[episode(k)]
        assert row["error_kind"] == "policy", (how, row["error_message"])
        assert any(text in row["error_message"] for text in SAYS[how]), (how, row["error_message"])
        assert len(row["error_message"]) < MAX_MESSAGE_CHARS + 100, how
        assert row["steps"] == 5, how
    summary = workbench.summarize(run.results).set_index("task").loc["ALL"]
    assert summary["infra_errors"] == 0 and summary["policy_errors"] == len(HOWS) - 1
    if backend == "pool":  # the replica's policy, unloaded when the pool stopped
        assert len(list(unloaded.iterdir())) == 1


@pytest.mark.parametrize("backend", ["sequential", "pool"])
def test_a_call_that_never_returns_is_its_episodes_policy_failure(tmp_path, backend):
    """Run apart from the other misbehaviours: a hung call holds its replica, so a call
    another worker sends to that replica meanwhile times out too (the same policy's fault,
    but it would hide what the other episode's own misbehaviour says)."""
    run = workbench.run(BASE | {"backend": backend, "pool": {"workers": 1}, "episodes": 1,
                                "output_dir": str(tmp_path / "run"),
                                "policy_options": {"hows": ["hang"]}})
    row = run.results.iloc[0]
    assert row["error_kind"] == "policy", row["error_message"]
    assert "did not return within 2 s" in row["error_message"], row["error_message"]
    assert row["steps"] == 5


#: a backend's settings (lanes: a pool worker of several environments sends a lane's
#: reset and end to the replica alone, its acts with the other lanes')
RUNTIMES = {"sequential": {"backend": "sequential"},
            "pool": {"backend": "pool", "pool": {"workers": 2}},
            "lanes": {"backend": "pool", "pool": {"workers": 1, "envs_per_worker": 3}}}


@pytest.mark.parametrize("where", ["reset", "end"])
@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_a_reset_or_end_that_raises_is_that_episodes_policy_failure(tmp_path, runtime, where):
    hows = ["none", "memory", "none", "infrastructure", "none"]
    run = workbench.run(BASE | RUNTIMES[runtime] | {
        "episodes": len(hows), "output_dir": str(tmp_path / "run"),
        "policy_options": {"hows": hows, "where": where}})
    df = run.results.set_index("episode_id")
    label = {"reset": "reset: ", "end": "end_episode: "}[where]
    for k, how in enumerate(hows):
        row = df.loc[episode(k)]
        if how == "none":
            assert pd.isna(row["error_kind"]) and row["steps"] == 12, (k, row["error_message"])
            continue
        assert row["error_kind"] == "policy", (k, row["error_message"])
        assert label in row["error_message"] and any(
            text in row["error_message"] for text in SAYS[how]), row["error_message"]
        assert row["steps"] == (0 if where == "reset" else 12)
    assert run.report.complete and not run.report.failures


def test_the_sequential_backend_unloads_its_policy(tmp_path):
    workbench.run(BASE | {"episodes": 1, "output_dir": str(tmp_path / "run"),
                          "policy_options": {"hows": ["none"], "unloaded_to": str(tmp_path / "u")}})
    assert len(list((tmp_path / "u").iterdir())) == 1


def test_a_policy_server_whose_policy_calls_os_exit_keeps_serving_and_blames_it(tmp_path):
    from workbench.service.policy_server import serve_policy

    with serve_policy("hostile_policies:Misbehaves", {"hows": ["none", "os_exit"]},
                      protocol="metaworld-v1") as served:
        run = workbench.run(BASE | {"episodes": 3, "policy": "remote",
                                    "policy_options": {"url": served.url, "timeout_s": 10},
                                    "output_dir": str(tmp_path)})
    df = run.results.set_index("episode_id")
    assert df.loc[episode(1), "error_kind"] == "policy"
    assert "the policy called os._exit(4)" in df.loc[episode(1), "error_message"]
    assert df.drop(index=episode(1))["error_kind"].isna().all()


def test_a_replica_the_policy_ends_past_every_guard_is_the_policys_failure(tmp_path):
    """posix._exit ends the replica process; it exited (a code, not a signal), so its
    episode is the policy's failure; the run finishes."""
    run = workbench.run(BASE | {"episodes": 2, "backend": "pool", "pool": {"workers": 1},
                                "output_dir": str(tmp_path),
                                "policy_options": {"hows": ["none", "posix_exit"]}})
    df = run.results.set_index("episode_id")
    assert pd.isna(df.loc[episode(0), "error_kind"])
    assert df.loc[episode(1), "error_kind"] == "policy"
    assert "the policy ended its replica process with exit code 5" in \
        df.loc[episode(1), "error_message"]


def claimed(folder) -> int:
    conn = sqlite3.connect(folder / "records.sqlite")
    (count,) = conn.execute("SELECT COUNT(*) FROM attempts").fetchone()
    conn.close()
    return count


@pytest.mark.parametrize("how", ["memory", "sys_exit"])
@pytest.mark.parametrize("backend", ["sequential", "pool"])
def test_a_policy_that_does_not_load_stops_the_run_naming_its_error_before_any_claim(
        tmp_path, backend, how):
    folder = tmp_path / "run"
    with pytest.raises(PolicyLoadFailed) as caught:
        workbench.run(BASE | {"backend": backend, "output_dir": str(folder),
                              "policy_options": {"hows": [how], "where": "load"}})
    assert "policy 'misbehaves' did not load: " in str(caught.value)
    assert any(text in str(caught.value) for text in SAYS[how]), str(caught.value)
    assert claimed(folder) == 0  # every episode left to a run whose policy loads


def test_the_command_line_says_in_one_line_that_the_policy_did_not_load(tmp_path):
    config = tmp_path / "eval.yaml"
    config.write_text(yaml.safe_dump(BASE | {
        "backend": "pool", "output_dir": str(tmp_path / "run"),
        "policy_options": {"hows": ["memory"], "where": "load"}}))
    done = subprocess.run([str(Path(sys.executable).parent / "workbench"), "eval",
                           str(config)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    (line,) = [l for l in done.stderr.splitlines() if "error:" in l]
    assert line.startswith("workbench eval: error: policy 'misbehaves' did not load: "
                           "MemoryError: the policy's own allocation"), line



#: what a load that fails as each misbehaviour says, and the text of the line of
#: tests/plugins/hostile_policies.py whose call raised or exited
LOAD_SAYS = {"memory": ("MemoryError: the policy's own allocation", "raise MemoryError("),
             "sys_exit": ("PolicyExited: the policy called sys.exit(3)", "sys.exit(3)"),
             "os_exit": ("PolicyExited: the policy called os._exit(4)", "os._exit(4)")}


def where_misbehaved(how: str) -> str:
    import hostile_policies

    path = Path(hostile_policies.__file__)
    lines = path.read_text().splitlines()
    return f"{path}:{next(i for i, l in enumerate(lines, 1) if LOAD_SAYS[how][1] in l)}"

@pytest.mark.parametrize("how", ["memory", "sys_exit", "os_exit"])
def test_a_policy_whose_constructor_fails_stops_the_run_naming_its_own_line(tmp_path, how):
    """The driver builds the policy to read its capabilities: an error (or an exit) there
    is the policy's, named with the line of the policy's code that raised or exited (not
    the guard's that turned the exit into an error), before any episode is claimed."""
    folder = tmp_path / "run"
    with pytest.raises(PolicyLoadFailed) as caught:
        workbench.run(BASE | {"backend": "pool", "output_dir": str(folder),
                              "policy_options": {"hows": [how], "where": "init"}})
    said = str(caught.value)
    assert said.startswith("policy 'hostile_policies:Misbehaves' did not load: "), said
    assert said.endswith(f"{LOAD_SAYS[how][0]} at {where_misbehaved(how)}"), said
    assert not (folder / "records.sqlite").exists()  # stopped before any record was made


def test_options_a_policy_constructor_rejects_stay_the_configs_error(tmp_path):
    with pytest.raises(ConfigError, match=r"policy 'hostile_policies:Misbehaves' with "
                                          r"options .*unknown misbehaviour 'bogus'"):
        workbench.run(BASE | {"output_dir": str(tmp_path / "run"),
                              "policy_options": {"hows": ["bogus"], "where": "init"}})


@pytest.mark.parametrize("where, how", [("load", "memory"), ("load", "sys_exit"),
                                        ("init", "os_exit")])
def test_serve_policy_says_in_one_line_that_the_policy_did_not_load(tmp_path, where, how):
    done = subprocess.run([str(Path(sys.executable).parent / "workbench"), "serve-policy",
                           "hostile_policies:Misbehaves", "--protocol", "metaworld-v1",
                           "--set", f"hows=[{how}]", "--set", f"where={where}", "--port", "0"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "serving policy" not in done.stdout, done.stderr
    (line,) = done.stderr.strip().splitlines()
    named = "misbehaves" if where == "load" else "hostile_policies:Misbehaves"
    assert line == (f"workbench serve-policy: error: policy '{named}' did not load: "
                    f"{LOAD_SAYS[how][0]} at {where_misbehaved(how)}"), line
