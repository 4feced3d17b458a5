"""docs/sim-wire.md is the SIM wire's specification: the standalone client written from it
runs against `workbench serve`, and what the page states is what the server does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "sim-wire.md"
CLIENT = ROOT / "docs" / "examples" / "sim_wire_client.py"
TOKEN = "doc-test-token-of-the-operator"
V2 = "workbench.sim-server/v2"


@pytest.fixture
def service(tmp_path):
    """A fresh `workbench serve` of three cases (each test attempts cases of its own)."""
    env = os.environ | {"WORKBENCH_SIM_TOKEN": TOKEN, "MUJOCO_GL": "egl"}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "workbench"), "serve",
                             "--benchmark", "metaworld", "--suite", "MT1:reach-v3",
                             "--episodes", "3", "--image-size", "32", "--max-steps", "25",
                             "--port", "0", "--state-dir", str(tmp_path / "state")],
                            stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert " at ws://" in line, line
    yield line.split(" at ", 1)[1].split(";")[0].strip()
    proc.terminate()
    proc.wait(timeout=20)


def ask(ws, message):
    ws.send(msgpack.packb(message, use_bin_type=True))
    return msgpack.unpackb(ws.recv(timeout=30), raw=False)


def ticket(url, case=None):
    """(ticket, case) from the operator's connection (the first case by default)."""
    with connect(url) as ws:
        welcome = ask(ws, {"type": "hello", "protocol": V2, "seq": 0, "token": TOKEN})
        case = case or welcome["schedule"][0]
        return ask(ws, {"type": "ticket", "seq": 1, "case": case})["ticket"], case


def test_the_standalone_client_imports_only_websockets_and_msgpack_and_is_short():
    source = CLIENT.read_text()
    found = re.findall(r"^(?:import|from) \S+", source, re.M)
    imports = {m.split()[1].split(".")[0] for m in found}
    assert imports == {"os", "struct", "sys", "msgpack", "websockets"}
    assert len(source.splitlines()) <= 90


def test_the_standalone_client_runs_two_cases_and_the_server_scores_them(service):
    done = subprocess.run([sys.executable, str(CLIENT), service], capture_output=True,
                          text=True, timeout=120, env=os.environ | {"WORKBENCH_SIM_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    cases = [f"metaworld/MT1:reach-v3/reach-v3/{k:04d}" for k in range(3)]
    assert done.stdout.splitlines() == [f"{c}: 25 steps, task 'reach-v3', success False"
                                        for c in cases]
    with connect(service) as ws:
        assert ask(ws, {"type": "hello", "protocol": V2, "seq": 0,
                        "token": TOKEN})["admin"] is True
        export = ask(ws, {"type": "export", "seq": 1})
    assert [(c["case"], c["state"], c["steps"]) for c in export["cases"]] == \
        [(c, "done", 25) for c in cases]


def test_what_the_page_states_about_seq_keys_and_refusals_holds(service):
    with connect(service) as ws:  # no key at all: refused and closed
        reply = ask(ws, {"type": "hello", "protocol": V2, "seq": 0})
        assert reply["code"] == "unauthorized" and "token or a ticket" in reply["message"]
    key, case = ticket(service)
    with connect(service) as ws:
        assert ask(ws, {"type": "observe", "seq": 5})["code"] == "sequence"  # starts at 0
        reply = ask(ws, {"type": "observe", "seq": 0})  # the refusal consumed nothing
        assert reply["code"] == "not_joined" and reply["seq"] == 0
        welcome = ask(ws, {"type": "hello", "protocol": V2, "seq": 1, "ticket": key})
        assert welcome["type"] == "welcome" and welcome["seq"] == 1  # refused, yet consumed
        assert welcome["case"] == case and welcome["schedule"] == []
        ws.send(b"\xc1 not msgpack")
        malformed = msgpack.unpackb(ws.recv(timeout=30), raw=False)
        assert malformed["code"] == "malformed" and malformed["seq"] is None
        refused = ask(ws, {"type": "start", "seq": 2, "features": ["privileged.state"]})
        assert refused["code"] == "features"
    with connect(service) as ws:
        ask(ws, {"type": "hello", "protocol": V2, "seq": 0, "token": TOKEN})
        status = ask(ws, {"type": "status", "seq": 1})
    states = {c["case"]: c["state"] for c in status["cases"]}
    assert set(states.values()) == {"unattempted"}, "a refused start burnt no case"


def test_arrays_come_with_bytes_keys_as_the_page_says(service):
    raw = msgpack.unpackb
    key, _ = ticket(service)
    with connect(service) as ws:
        ws.send(msgpack.packb({"type": "hello", "protocol": V2, "seq": 0, "ticket": key}))
        raw(ws.recv(timeout=30), raw=False)
        ws.send(msgpack.packb({"type": "start", "seq": 1, "features": ["state"]}))
        started = raw(ws.recv(timeout=30), raw=False)
    state = started["observation"]["state"]
    assert set(state) == {b"__ndarray__", b"data", b"dtype", b"shape"}
    assert state[b"dtype"] == "<f4" and state[b"shape"] == [4]


def test_every_error_code_the_server_can_send_is_in_the_pages_table():
    server = (ROOT / "workbench" / "service" / "sim_server.py").read_text()
    sent = set(re.findall(r'_Refusal\("(\w+)"', server))
    table = DOC.read_text().split("## Errors", 1)[1].split("## Which mistakes", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)?", table, re.M))
    documented = {code for pair in listed for code in pair if code}
    assert sent == documented, (sent - documented, documented - sent)
