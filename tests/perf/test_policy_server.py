"""perf/policy_server.py at tiny settings: both servers measured for each client
count in interleaved rounds, every ratio the quotient of the rows it names, the policy's
own batching ceiling measured in the same run, the files written."""

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "perf" / "policy_server.py"


def load_script():
    spec = importlib.util.spec_from_file_location("policy_server_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_tiny_run_measures_both_servers_side_by_side_and_the_ceiling(tmp_path):
    out = tmp_path / "policy_server_tiny"
    result = load_script().main(["--rounds", "2", "--requests", "3", "--clients", "1", "2",
                                 "--image-size", "32", "--out", str(out)])
    measured = result["measured"]
    assert [(r["round"], r["clients"], r["mode"]) for r in measured] == [
        (0, 1, "one-at-a-time"), (0, 1, "batched"), (0, 2, "one-at-a-time"), (0, 2, "batched"),
        (1, 1, "batched"), (1, 1, "one-at-a-time"), (1, 2, "batched"), (1, 2, "one-at-a-time")]
    assert all(r["requests"] == 3 * r["clients"] and r["requests_per_s"] > 0 for r in measured)
    assert all(r["mean_batch"] == 1.0 for r in measured if r["mode"] == "one-at-a-time")
    rows = {(r["clients"], r["mode"]): r for r in result["rows"]}
    for ratio in result["ratios"]:
        clients = int(ratio["numerator"].split(", ")[1].split()[0])
        assert ratio["value"] == rows[clients, "batched"]["requests_per_s"] / \
            rows[clients, "one-at-a-time"]["requests_per_s"]
        mine = sorted(r["requests_per_s"] for r in measured
                      if r["clients"] == clients and r["mode"] == "batched")
        assert rows[clients, "batched"]["requests_per_s"] == (mine[0] + mine[1]) / 2
    assert [c["batch"] for c in result["ceiling"]] == [1, 2]
    assert result["ceiling"][0]["ceiling"] == 1.0 and result["ceiling"][1]["ms_per_observation"] > 0
    assert "target" not in result  # 4 clients were not measured: no verdict
    assert json.loads(out.with_suffix(".json").read_text())["rows"] == result["rows"]
    assert "ceiling" in out.with_suffix(".txt").read_text()
