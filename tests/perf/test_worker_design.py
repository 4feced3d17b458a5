"""perf/worker_design.py at a tiny size: the probe's workers step several environments
each, their batches hold more than one request, every episode's outcome equals the pool's,
and each ratio is the quotient of the rows it names."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "perf" / "worker_design.py"


def test_the_design_probe_batches_and_agrees_with_the_pool(tmp_path):
    out = tmp_path / "design.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tasks", "2", "--episodes", "2", "--rounds", "1",
         "--mlp", "64x2", "--envs", "2", "--pool-workers", "4", "--max-steps", "20",
         "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(out.read_text())
    rows = {r["system"]: r for r in summary["rows"]}
    assert set(rows) == {"bound", "pool", "design"}
    # 2 episodes per design worker on 2 environments: both ask together until one ends
    assert rows["design"]["mean_batch"] > 1.5 and rows["design"]["errors"] == []
    assert rows["design"]["steps"] == rows["pool"]["steps"] > 0
    assert summary["outcomes_agree"] is True
    for name, ratio in summary["ratios"].items():
        expected = (rows[ratio["numerator"]]["steps_per_s"]
                    / rows[ratio["denominator"]]["steps_per_s"])
        assert ratio["value"] == pytest.approx(expected), name
