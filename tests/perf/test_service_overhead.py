"""perf/service_overhead.py at tiny settings: a local and a service row per
workload, positive steps/s, and a ratio that is the ratio of the printed medians."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "perf" / "service_overhead.py"
PRINTED_PRECISION = 1e-3  # medians are printed to 3 decimals, each well above 1 step/s


def load_script():
    spec = importlib.util.spec_from_file_location("service_overhead", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def printed_rows(text):
    """{(workload, path): [numbers after the path]} from the printed table."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["workload", "path"])
    rows = {}
    for line in lines[head + 1:]:
        words = line.split()
        at = words.index("local") if "local" in words else words.index("service")
        rows[(" ".join(words[:at]), words[at])] = [float(w) for w in words[at + 1:]]
    return rows


def test_tiny_run_prints_both_paths_and_the_ratio_of_their_medians(tmp_path, capsys):
    payload = load_script().main(["--quick", "--repeats", "1", "--episodes", "1",
                                  "--max-steps", "8", "--workloads", "zero", "vision bc",
                                  "--out", str(tmp_path)])
    rows = printed_rows(capsys.readouterr().out)
    assert set(rows) == {(w, p) for w in ("zero", "vision bc") for p in ("local", "service")}
    for workload in ("zero", "vision bc"):
        # columns: runs, steps/run, median steps/s, min, max[, ratio, overhead ms/step]
        local, service = rows[(workload, "local")], rows[(workload, "service")]
        assert local[0] == service[0] == 1 and local[1] == service[1] == 8
        assert local[2] > 0 and service[2] > 0
        ratio, overhead = service[5], service[6]
        # the ratio is printed to 3 decimals (up to 0.0005 off), the rates it divides too
        # (each up to 0.0005 off, relatively 0.0005 / rate)
        ratio_rounding = 0.0005 + ratio * 0.0005 * (1 / service[2] + 1 / local[2])
        assert ratio == pytest.approx(service[2] / local[2], abs=ratio_rounding)
        # the rates are printed to 3 decimals: their rounding moves 1000 / rate by up to
        # 1000 * 0.0005 / rate**2 (large at a loaded machine's slow rates)
        rounding = 1000 * 0.0005 * (1 / service[2] ** 2 + 1 / local[2] ** 2) + 0.0005
        assert overhead == pytest.approx((1 / service[2] - 1 / local[2]) * 1000,
                                         abs=rounding + PRINTED_PRECISION * abs(overhead))
    assert payload["same_outcomes"] is True
    written = json.loads((tmp_path / "service_overhead_quick.json").read_text())
    assert written["summary"] == payload["summary"]
    assert printed_rows((tmp_path / "service_overhead_quick.txt").read_text()) == rows
