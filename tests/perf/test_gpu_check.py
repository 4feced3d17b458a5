"""perf/gpu_check.py on a machine without a GPU: one JSON line saying so, exit 0
(the GPU steps run only where a GPU is lent; see the script)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "perf" / "gpu_check.py"


def test_without_a_gpu_it_prints_one_json_line_saying_why():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: run the script itself (about five minutes)")
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.strip().splitlines()
    assert json.loads(line) == {"gpu": False, "reason": "torch sees no CUDA device"}
