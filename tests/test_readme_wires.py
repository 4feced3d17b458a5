"""docs/remote-models.md, the sections on openpi and vla-eval, run as written (ports moved to free ones):
an eval through each ecosystem's own server, and each ecosystem's own client against
`workbench serve-policy`."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

import workbench

pytest.importorskip("openpi_client")
pytest.importorskip("openpi_server")
pytest.importorskip("vla_eval")

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "docs" / "remote-models.md").read_text()
BLOCK = re.compile(r"<!-- test: (?P<kind>[\w-]+) (?P<wire>[\w-]+) -->\n```\w*\n(?P<body>.*?)```",
                   re.S)
BLOCKS = {(m["kind"], m["wire"]): m["body"] for m in BLOCK.finditer(README)}
BIN = str(Path(sys.executable).parent) + "/"
START_S = 120


def env() -> dict[str, str]:
    plugins = str(ROOT / "tests" / "plugins")
    return os.environ | {"PYTHONPATH": os.pathsep.join(
        p for p in (plugins, os.environ.get("PYTHONPATH")) if p), "MUJOCO_GL": "egl"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_readme_has_every_block_this_test_runs():
    assert set(BLOCKS) == {(k, w) for k in ("remote-eval", "serve", "client")
                           for w in ("openpi", "vla-eval")}


def wait_http(port: int, path: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2).read()
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"nothing listens on {port}")


@pytest.mark.parametrize("wire, key, health", [("openpi", "observation/state", "/healthz"),
                                               ("vla-eval", "states", "/health")])
def test_an_eval_through_their_own_server_runs_as_the_readme_writes_it(tmp_path, wire, key,
                                                                        health):
    config = yaml.safe_load(BLOCKS["remote-eval", wire])
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "wire_policies", wire, str(port), key,
                               "4"], env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        wait_http(port, health, server)
        config["policy_options"]["url"] = f"ws://127.0.0.1:{port}"
        (tmp_path / "eval.yaml").write_text(yaml.safe_dump(config))
        done = subprocess.run([f"{BIN}workbench", "eval", "eval.yaml"], cwd=tmp_path, env=env(),
                              capture_output=True, text=True, timeout=600)
    finally:
        server.kill()
        server.wait(timeout=10)
    assert done.returncode == 0, done.stderr[-3000:]
    records = workbench.load_results(tmp_path / config["output_dir"] / "records.sqlite")
    assert len(records) == config["episodes"] and records["error_kind"].isna().all()
    assert (records["policy"] == wire).all()


@pytest.mark.parametrize("wire, shape", [("openpi", "(7,)"), ("vla-eval", "(4,)")])
def test_their_own_client_drives_serve_policy_as_the_readme_writes_it(tmp_path, wire, shape):
    command = BLOCKS["serve", wire].replace("\\\n", " ").replace(".venv/bin/", BIN)
    written = re.search(r"--port (\d+)", command).group(1)
    port = str(free_port())
    # no shell between us and the server: terminating a shell left its server running
    server = subprocess.Popen(shlex.split(command.replace(f"--port {written}", f"--port {port}")),
                              env=env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = server.stdout.readline()
        assert f"at ws://127.0.0.1:{port}" in line, line + server.stderr.read()
        client = tmp_path / "client.py"
        client.write_text(BLOCKS["client", wire].replace(written, port))
        done = subprocess.run([sys.executable, str(client)], capture_output=True, text=True,
                              timeout=300, env=env())
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == shape
