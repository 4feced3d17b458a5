"""The SIM service trusts only whom it gave a key, remembers what it ran across a restart
(SQLite beside it), keeps its token to itself, and refuses bad numbers in one line; a
dead service makes ``eval`` exit 1 naming it. Through the real ``workbench serve`` and
``workbench eval`` processes and raw loopback connections."""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from tally import note, refused, workbench
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import workbench as wb
from workbench.contracts.wire import decode, encode
from workbench.service.sim_client import SimClient
from workbench.service.sim_server import PROTOCOL

ZERO = np.zeros(4, np.float32)
SUITE = "MT1:reach-v3"
CASES = [f"metaworld/{SUITE}/reach-v3/{k:04d}" for k in range(4)]
TOKEN = "reliability-operator-token"
SERVE = ["--benchmark", "metaworld", "--suite", SUITE, "--episodes", "4", "--image-size",
         "32", "--max-steps", "20", "--port", "0"]
RUN = {"benchmark": "metaworld", "suite": SUITE, "episodes": 4, "image_size": 32,
       "max_steps": 20, "progress": False, "policy": "zero", "backend": "service"}


def serve(state: Path, *extra: str, token: str | None = TOKEN) -> tuple[subprocess.Popen, str]:
    """A ``workbench serve`` process on ``state``; (process, its first line)."""
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_SIM_TOKEN"}
    env |= {"WORKBENCH_SIM_TOKEN": token} if token else {}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "serve", *SERVE,
                             "--state-dir", str(state), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert " at ws://" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line


def url_of(line: str) -> str:
    return re.search(r"at (ws://\S+);", line).group(1)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def raw_hello(url: str, **fields) -> dict:
    """One hello on a fresh connection; the reply (the connection is then closed)."""
    with connect(url, open_timeout=10) as ws:
        ws.send(encode({"type": "hello", "seq": 0, "protocol": PROTOCOL, **fields}))
        reply = decode(ws.recv(timeout=10))
        if reply["type"] == "error":
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=10)  # the server closes it
        return reply


def states(url: str) -> dict[str, tuple[str, int]]:
    admin = SimClient(url, TOKEN, timeout_s=10)
    try:
        return {c["case"]: (c["state"], c["attempts"]) for c in admin.request("status")["cases"]}
    finally:
        admin.close()


@pytest.fixture
def service(tmp_path):
    proc, line = serve(tmp_path / "state")
    yield url_of(line)
    stop(proc)


# -- a stranger burns nothing ---------------------------------------------------------------
def test_without_a_key_nothing_starts_ends_or_holds_a_case(service):
    before = states(service)
    admin = SimClient(service, TOKEN, timeout_s=10)
    used = admin.request("ticket", case=CASES[0])["ticket"]
    session = SimClient(service, ticket=used, timeout_s=10)  # joined: the ticket is used
    hostile = {"no credential": {}, "an empty token": {"token": ""},
               "a guessed token": {"token": "x" * 32}, "a forged ticket": {"ticket": "x" * 32},
               "a used ticket": {"ticket": used}, "a ticket of the wrong type": {"ticket": 7},
               "token and ticket": {"token": TOKEN, "ticket": used}}
    for what, fields in hostile.items():
        reply = raw_hello(service, **fields)
        ok = reply["type"] == "error" and reply["code"] == "unauthorized"
        note(f"SIM hello with {what}", "clean refusal" if ok else "silently accepted")
        assert ok, (what, reply)
    with pytest.raises(Exception, match="unauthorized"):
        admin.request("start", case=CASES[1], features=["state"])
    note("SIM start on the admin connection", "clean refusal")
    with pytest.raises(Exception, match="wrong_case"):
        session.request("start", case=CASES[1], features=["state"])
    note("SIM start of another case on a ticket", "clean refusal")
    assert states(service) == before  # nothing started, ended or burnt
    session.close()
    admin.close()


def test_a_silent_connection_is_closed_and_holds_no_slot(tmp_path):
    proc, line = serve(tmp_path / "state", "--idle-timeout", "1")
    try:
        url = url_of(line)
        with connect(url, open_timeout=10) as silent:
            time.sleep(2.5)
            with pytest.raises(ConnectionClosed):
                silent.recv(timeout=5)
        note("SIM connection that never speaks", "clean refusal")
    finally:
        stop(proc)


# -- the token stays secret -------------------------------------------------------------------
def test_a_generated_token_is_never_printed_and_its_file_is_0600(tmp_path):
    proc, line = serve(tmp_path / "state", token=None)
    try:
        token = (tmp_path / "state" / "token").read_text()
        assert len(token) >= 32 and token not in line and "mode 0600" in line
        assert stat.S_IMODE((tmp_path / "state" / "token").stat().st_mode) == 0o600
        assert SimClient(url_of(line), token, timeout_s=10).welcome["admin"] is True
    finally:
        stop(proc)
    proc, line = serve(tmp_path / "shown", "--show-token", "--token-file",
                       str(tmp_path / "t"), token=None)
    stop(proc)
    assert (tmp_path / "t").read_text() in line  # only when asked
    assert stat.S_IMODE((tmp_path / "t").stat().st_mode) == 0o600
    note("serve without $WORKBENCH_SIM_TOKEN (token printed?)", "accepted as documented")


# -- a restart remembers; the driver reconciles -------------------------------------------------
def test_a_restarted_service_refuses_what_it_ran_and_the_driver_reconciles(tmp_path,
                                                                          monkeypatch):
    state = tmp_path / "state"
    proc, line = serve(state)
    url = url_of(line)
    admin = SimClient(url, TOKEN, timeout_s=10)
    # case 0 runs to its end outside the driver's records (as if the driver died after
    # the service finished it); case 1 is running when the service is SIGKILLed
    done = SimClient(url, ticket=admin.request("ticket", case=CASES[0])["ticket"])
    done.request("start", features=["state"])
    while not done.request("step", action=ZERO)["done"]:
        pass
    running = SimClient(url, ticket=admin.request("ticket", case=CASES[1])["ticket"])
    running.request("start", features=["state"])
    running.request("step", action=ZERO)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -9

    proc, line = serve(state)  # the same state folder: it remembers
    url = url_of(line)
    try:
        assert states(url) == {CASES[0]: ("done", 1), CASES[1]: ("abandoned", 1),
                               CASES[2]: ("unattempted", 0), CASES[3]: ("unattempted", 0)}
        admin = SimClient(url, TOKEN, timeout_s=10)
        for case in CASES[:2]:
            with pytest.raises(Exception, match="attempted"):
                admin.request("ticket", case=case)
        admin.close()
        monkeypatch.setenv("WORKBENCH_SIM_TOKEN", TOKEN)
        run = wb.run(RUN | {"service": {"url": url}, "output_dir": str(tmp_path / "out")})
        rows = run.results.set_index("episode_id")
        # case 0 from the service's own score, not run again; case 1 interrupted
        assert (rows.loc[CASES[0], "steps"], rows.loc[CASES[0], "termination"]) == \
            (20, "step_limit") and pd_isna(rows.loc[CASES[0], "error_kind"])
        assert rows.loc[CASES[1], "error_kind"] == "infrastructure"
        assert "holds " + CASES[1] + " as abandoned" in rows.loc[CASES[1], "error_message"]
        assert rows.loc[CASES[2:], "error_kind"].isna().all()
        assert states(url) == {CASES[0]: ("done", 1), CASES[1]: ("abandoned", 1),
                               CASES[2]: ("done", 1), CASES[3]: ("done", 1)}
    finally:
        stop(proc)
    # the same folder for another schedule: refused, naming the file; the claims stand
    outcome = workbench("serve", *with_args(SERVE, "--episodes", "5"), "--state-dir",
                        str(state), env={"WORKBENCH_SIM_TOKEN": TOKEN})
    refused(outcome, "serve on another service's state folder", "belongs to another service")


def pd_isna(value) -> bool:
    return value is None or value != value


# -- a dead service is said, not swallowed -------------------------------------------------------
def test_a_dead_service_makes_eval_exit_1_naming_it_and_the_cases_left(tmp_path):
    proc, line = serve(tmp_path / "state")
    url = url_of(line)
    config = tmp_path / "eval.yaml"
    config.write_text(yaml.safe_dump(RUN | {
        "policy": "service_policies:KillsAtStep", "service": {"url": url},
        "output_dir": str(tmp_path / "out")}))
    try:
        outcome = workbench("eval", str(config),
                            env={"WORKBENCH_SIM_TOKEN": TOKEN, "WB_KILL_PID": str(proc.pid)})
        assert proc.wait(10) == -9  # really killed
    finally:
        proc.kill()
    said = refused(outcome, "eval against a SIM service that dies", url, code=1)
    assert "3 planned cases not attempted" in said, said
    results = wb.load_results(tmp_path / "out" / "records.sqlite")
    assert results["status"].tolist().count("planned") == 3  # kept for the resume


# -- numbers and ports ------------------------------------------------------------------------
BAD_SERVE = [
    (["--slots", "0"], "slots"), (["--slots", "-3"], "slots"),
    (["--idle-timeout", "-5"], "idle_timeout_s"), (["--idle-timeout", "nan"], "idle_timeout_s"),
    (["--idle-timeout", "inf"], "idle_timeout_s"), (["--idle-timeout", "0"], "idle_timeout_s"),
    (["--image-size", "0"], "image_size"), (["--image-size", "100000"], "image_size"),
    (["--episodes", "300000"], "episodes"), (["--episodes", "0"], "episodes"),
    (["--port", "99999"], "port"), (["--port", "-1"], "port"),
    (["--max-steps", "0"], "max_steps"), (["--seed", "-1"], "seed"),
    (["--seed", str(2**40)], "seed")]


def with_args(base: list[str], flag: str, value: str) -> list[str]:
    """``base`` with ``flag`` set to ``value`` (replaced, or added)."""
    if flag in base:
        at = base.index(flag) + 1
        return base[:at] + [value] + base[at + 1:]
    return [*base, flag, value]


def test_every_serve_number_is_checked_in_one_line(tmp_path):
    for args, key in BAD_SERVE:
        line = with_args([*SERVE, "--state-dir", str(tmp_path / "state")], *args)
        outcome = workbench("serve", *line, env={"WORKBENCH_SIM_TOKEN": TOKEN}, timeout=120)
        refused(outcome, f"serve {' '.join(args)}", key)
    assert not (tmp_path / "state" / "service.sqlite").exists()  # nothing created


@pytest.mark.parametrize("command", ["serve", "serve-policy"])
def test_a_port_in_use_is_one_line(tmp_path, command):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = str(taken.getsockname()[1])
    try:
        if command == "serve":
            args = with_args(SERVE, "--port", port) + ["--state-dir", str(tmp_path)]
        else:
            args = ["zero", "--protocol", "metaworld-v1", "--port", port]
        outcome = workbench(command, *args, env={"WORKBENCH_SIM_TOKEN": TOKEN}, timeout=120)
    finally:
        taken.close()
    refused(outcome, f"{command} on a port in use", f":{port}")
