"""What `workbench serve-policy` bounds, through the real CLI and real sockets: a hung
policy call, SIGTERM while it hangs, too many connections, a silent one, and options that
make no sense."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from workbench.contracts.wire import decode, encode
from workbench.service.policy_server import serve_policy

ROOT = Path(__file__).resolve().parents[2]
WORKBENCH = str(Path(sys.executable).parent / "workbench")
RECV_S = 10.0
STATE = {"state": np.zeros(4, np.float32)}


def start(*args: str) -> tuple[subprocess.Popen, str]:
    env = os.environ | {"PYTHONPATH": str(ROOT / "tests" / "plugins")}
    proc = subprocess.Popen([WORKBENCH, "serve-policy", *args, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert " at ws://" in line, line + proc.stderr.read()
    return proc, line.rsplit(" at ", 1)[1].strip()


def test_a_hung_policy_call_fails_as_the_servers_and_sigterm_still_stops_it():
    proc, url = start("helper_policies:HangsOnNegativeState", "--protocol", "metaworld-v1",
                      "--call-timeout-s", "1")
    try:
        with connect(url, compression=None) as ws, connect(url, compression=None) as other:
            ws.recv(timeout=RECV_S), other.recv(timeout=RECV_S)
            ws.send(encode({"state": np.full(4, -1.0, np.float32)}))
            began = time.monotonic()
            reply = decode(ws.recv(timeout=RECV_S))
            assert time.monotonic() - began < 5
            assert reply == {"error": "server error: the policy call did not return within 1 s",
                             "blame": "server"}
            time.sleep(1.2)  # the call is still running: every later call fails at once
            other.send(encode(STATE))
            reply = decode(other.recv(timeout=RECV_S))
            assert reply["blame"] == "server" and "has been in one call for" in reply["error"]
            proc.send_signal(signal.SIGTERM)
            began = time.monotonic()
            assert proc.wait(timeout=10) == 0
            assert time.monotonic() - began < 5, "stopped within 5 s despite the hung call"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_connections_beyond_the_limit_are_refused_and_a_silent_one_is_closed():
    with serve_policy("zero", protocol="metaworld-v1", max_connections=2,
                      idle_timeout_s=1.0) as served:
        first, second = connect(served.url), connect(served.url)
        with pytest.raises(InvalidStatus) as refused:
            connect(served.url)
        assert refused.value.response.status_code == 503
        first.recv(timeout=RECV_S), second.recv(timeout=RECV_S)
        second.send(encode(STATE))
        assert decode(second.recv(timeout=RECV_S))["actions"].shape == (1, 4)
        with pytest.raises(ConnectionClosed) as closed:
            first.recv(timeout=RECV_S)  # silent for more than a second
        assert closed.value.rcvd.code == 1000 and "idle for 1 s" in closed.value.rcvd.reason
        stats = served.stats()
        assert stats["connections_refused"] == 1 and stats["idle_closed"] >= 1
        second.close()


def busy_port() -> socket.socket:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


@pytest.mark.parametrize("args, message", [
    (["--port", "99999"], "port: expected an integer from 0 to 65535; got 99999"),
    (["--max-batch", "0"], "max_batch: expected an integer >= 1; got 0"),
    (["--call-timeout-s", "-5"], "call_timeout_s: expected a finite number > 0; got -5.0"),
    (["--max-wait-ms", "nan"], "max_wait_ms: expected a finite number >= 0; got nan"),
    (["--min-chunk", "0"], "min_chunk: expected an integer >= 1; got 0"),
    (["--wire", "openpi", "--preset", "vla-eval/metaworld"],
     "preset 'vla-eval/metaworld': expected one of the openpi wire; got one of the vla-eval"),
    (["--wire", "openpi", "--preset", "openpi/metaworld", "--keys", "{a: state}"],
     "give a preset or a key map, not both"),
    (["--wire", "openpi", "--keys", "[1, 2]"],
     "keys: expected a map of their keys to features; got list"),
    (["--wire", "vla-eval", "--protocol", "kitchen-v1"],
     "the vla-eval wire has no preset for protocol 'kitchen-v1'"),
    (["--keys", "{a: state}"], "--preset and --keys are for the openpi and vla-eval wires"),
])
def test_options_that_make_no_sense_are_refused_in_one_line(args, message):
    done = subprocess.run([WORKBENCH, "serve-policy", "zero", "--protocol", "metaworld-v1",
                           *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_port_in_use_is_refused_in_one_line():
    holder = busy_port()
    try:
        port = holder.getsockname()[1]
        done = subprocess.run([WORKBENCH, "serve-policy", "zero", "--protocol", "metaworld-v1",
                               "--port", str(port)], capture_output=True, text=True,
                              timeout=120)
    finally:
        holder.close()
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
