"""What tests/reliability tried, and how each input ended, for the count the suite
prints at its end (tests/conftest.py): inputs tried, clean refusals, tracebacks, silent
acceptances, records lost. Every test process appends one JSON line per input to the
file named by ``$WORKBENCH_RELIABILITY_TALLY``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

KINDS = ("clean refusal", "accepted as documented", "traceback", "silently accepted",
         "not one line", "records lost")


def note(what: str, kind: str) -> None:
    """Count one input ``what`` as ``kind`` (one of :data:`KINDS`)."""
    assert kind in KINDS, kind
    path = os.environ.get("WORKBENCH_RELIABILITY_TALLY")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"input": what, "kind": kind}) + "\n")


def summary(path: str | Path) -> str | None:
    """The line the suite prints, from the tally file (None when nothing was tried)."""
    try:
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    except OSError:
        return None
    if not rows:
        return None
    counts = {k: sum(r["kind"] == k for r in rows) for k in KINDS}
    return (f"reliability: {len(rows)} inputs tried: "
            + ", ".join(f"{k} {n}" for k, n in counts.items()))


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str


def workbench(*args: str, cwd: str | Path | None = None, timeout: float = 300,
              env: dict | None = None, wrap: list[str] | None = None) -> Outcome:
    """The real ``workbench`` command line, in its own process; ``wrap`` runs it under
    another command (``unshare -m sh -c``)."""
    command = [sys.executable, "-m", "workbench.cli", *args]
    if wrap:  # the last item of wrap is a shell line the command ends
        command = [*wrap[:-1], wrap[-1] + " " + " ".join(_quote(c) for c in command)]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return Outcome(done.returncode, done.stdout, done.stderr)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def refused(outcome: Outcome, what: str, says: str, code: int = 2) -> str:
    """Assert ``outcome`` is one clean refusal: exit ``code``, one stderr line holding
    ``says``, no traceback; counts it. Returns the line."""
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    kind = ("traceback" if "Traceback" in outcome.stderr else
            "silently accepted" if outcome.rc == 0 else
            "not one line" if len(lines) != 1 or outcome.rc != code else "clean refusal")
    note(what, kind)
    assert kind == "clean refusal", (what, outcome.rc, outcome.stderr[-3000:])
    assert says in lines[0], (what, lines[0])
    return lines[0]
