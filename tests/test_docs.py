"""Every code block of the README and of docs/ runs as written.

Each fenced block is tagged with what runs it, on the line above it:

- ``<!-- test: file NAME -->``: written as NAME into the page's fresh folder first;
- ``<!-- test: shell -->``: run with bash (``-e``) in that folder, in page order;
- ``<!-- test: server PORT -->``: a server started in the background (PORT moved to a
  free one on the whole page), waited for, and stopped after the page's blocks;
- ``<!-- test: python -->``: run with the venv's Python in that folder;
- ``<!-- test: config -->``: a YAML config (or a fragment of one) loaded and validated;
- ``<!-- test: toml -->``: TOML whose entry points must import (with the page's files);
- ``<!-- test: ci main|tests -->``: the two commands for a fresh machine (``.ci/run``
  runs the second, CI the whole; checked here to be what they say);
- ``<!-- test: remote-eval|serve|client WIRE -->``: run by tests/test_readme_wires.py
  against the other ecosystem's own server and client;
- ``<!-- test: not-here: REASON -->``: needs what this machine has not (a GPU, model
  weights); syntax-checked only;
- ``<!-- test: text: WHAT -->``: not code (a diagram), with no language.

A block without a tag fails the test, so a new block cannot go unrun.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"(?:<!-- test: (?P<tag>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```",
                   re.S)
BIN = str(Path(sys.executable).parent) + "/"
WIRES = ("remote-eval", "serve", "client")
BASE = {"benchmark": "metaworld", "suite": "MT1:reach-v3", "policy": "zero"}


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """(tag, language, body) of every fenced block of ``page``, in order."""
    return [(m["tag"] or "", m["lang"], m["body"]) for m in FENCE.finditer(page.read_text())]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_says_what_runs_it(page):
    untagged = [body.splitlines()[0] if body else "" for tag, _, body in blocks(page) if not tag]
    assert untagged == [], f"{page.name}: blocks without a test tag"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(folder: Path) -> dict[str, str]:
    return {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"],
            "PYTHONPATH": str(folder), "LP_NUM_THREADS": "0"}


def shell(body: str) -> str:
    return body.replace(".venv/bin/", BIN)


def wait_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise AssertionError(f"nothing listened on {port}")


def check_config(body: str, folder: Path) -> None:
    from workbench.config import load_config

    data = yaml.safe_load(body)
    if "benchmark" not in data:
        data = {**BASE, **data}
    path = folder / "block.yaml"
    path.write_text(yaml.safe_dump(data))
    load_config(path)


def check_toml(body: str, folder: Path) -> None:
    targets = [target for group in tomllib.loads(body)["project"]["entry-points"].values()
               for target in group.values()]
    code = ("from workbench.contracts import import_target\n"
            f"for t in {targets!r}: import_target(t)")
    subprocess.run([sys.executable, "-c", code], cwd=folder, env=env_for(folder), check=True,
                   timeout=120)


def check_ci(kind: str, body: str) -> None:
    command = body.strip()
    if kind == "tests":
        assert command in (ROOT / ".ci" / "run").read_text(), "CI runs the README's command"
    assert command.startswith("bash scripts/install.sh && .venv/bin/")
    assert (ROOT / "scripts" / "install.sh").exists()
    tail = command.split("&& ")[1].replace(".venv/bin/", BIN).split()
    subprocess.run(tail[:1] + (["-m", "pytest", "--version"] if kind == "tests"
                               else ["reproduce", "--help"]),
                   check=True, capture_output=True, timeout=120)


def check_not_here(lang: str, body: str, folder: Path) -> None:
    if lang == "python":
        compile(body, "block", "exec")
    else:
        (folder / "block.sh").write_text(body)
        subprocess.run(["bash", "-n", str(folder / "block.sh")], check=True)


RUNNABLE = [page for page in PAGES if any(not t.startswith(WIRES) for t, _, _ in blocks(page))]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_every_block_of_the_page_runs_as_written(page, tmp_path):
    items = blocks(page)
    ports = {m: str(free_port()) for t, _, _ in items if t.startswith("server")
             for m in t.split()[1:]}
    for old, new in ports.items():
        items = [(t, lang, body.replace(old, new)) for t, lang, body in items]
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    for tag, _, body in items:
        if tag.startswith("file "):
            (tmp_path / tag.split()[1]).write_text(body)
    servers: list[subprocess.Popen] = []
    exports: dict[str, str] = {}
    try:
        for tag, lang, body in items:
            kind = tag.split()[0].rstrip(":")
            env = {**env_for(tmp_path), **exports}
            if kind == "shell":
                done = subprocess.run(["bash", "-e", "-c", shell(body)], cwd=tmp_path, env=env,
                                      capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, f"{body}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
            elif kind == "server":
                lines = shell(body).splitlines()
                for line in (line for line in lines if line.startswith("export ")):
                    name = line.split()[1].split("=")[0]
                    exports[name] = subprocess.run(
                        ["bash", "-c", f'{line}\nprintf %s "${name}"'], env=env, check=True,
                        capture_output=True, text=True).stdout
                command = "\n".join(line for line in lines if not line.startswith("export "))
                servers.append(subprocess.Popen(["bash", "-c", "exec " + command.strip()],
                                                cwd=tmp_path, env={**env, **exports},
                                                stdout=subprocess.DEVNULL,
                                                stderr=subprocess.PIPE, text=True))
                wait_port(int(ports[tag.split()[1]]), servers[-1])
            elif kind == "python":
                subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=env, check=True,
                               timeout=600)
            elif kind == "config":
                check_config(body, tmp_path)
            elif kind == "toml":
                check_toml(body, tmp_path)
            elif kind == "ci":
                check_ci(tag.split()[1], body)
            elif kind == "not-here":
                check_not_here(lang, body, tmp_path)
            elif kind == "text":
                assert lang == "", "a text block has no language: it is not code"
            else:
                assert kind == "file" or kind in WIRES, f"unknown tag {tag!r}"
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=60)
    if page.name in RECORDED:
        RECORDED[page.name](tmp_path)
    shutil.rmtree(tmp_path / "runs", ignore_errors=True)


def episodes(db: Path) -> list[dict]:
    import json

    out = subprocess.run([sys.executable, "-m", "workbench.cli", "results", str(db), "--json"],
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def drift_recorded(folder: Path) -> None:
    """What your-own-policy.md's run recorded: four episodes of 500 steps, chunks of four
    actions (125 calls), spread over the two pool workers."""
    rows = episodes(folder / "runs" / "my-drift" / "records.sqlite")
    assert len(rows) == 4 and {r["policy"] for r in rows} == {"drift"}
    assert all(r["error"] is None and r["steps"] == 500 for r in rows)
    assert all(r["policy_calls"] == 125 for r in rows)
    assert {r["worker"] for r in rows} == {"worker-0", "worker-1"}


def toy_recorded(folder: Path) -> None:
    """What your-own-benchmark.md's run recorded: six successes of the toy benchmark,
    over both pool workers."""
    rows = episodes(folder / "runs" / "toy" / "records.sqlite")
    assert len(rows) == 6 and all(r["success"] and r["error"] is None for r in rows)
    assert {r["episode_id"].split("/")[0] for r in rows} == {"toy"}
    assert {r["worker"] for r in rows} == {"worker-0", "worker-1"}


RECORDED = {"your-own-policy.md": drift_recorded, "your-own-benchmark.md": toy_recorded}
