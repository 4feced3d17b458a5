"""perf/throughput.py at a tiny size (2 tasks, 16 steps, 32 px, two interleaved
rounds; no Ray or vla-eval rows, which their own tests and the full run cover): the
JSON's keys, the interleaving, and every reported number against the rows it names."""

import importlib.util
import json
import statistics
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "perf" / "throughput.py"
SYSTEMS = ["sequential", "single chunk", "ceiling", "pool every step", "pool chunk fixed",
           "pool chunk searched"]


def load_script():
    spec = importlib.util.spec_from_file_location("throughput", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("throughput") / "throughput.json"
    summary = load_script().main([
        "--tasks", "2", "--episodes", "1", "--max-steps", "16", "--image-size", "32",
        "--rounds", "2", "--skip-ray", "--skip-vla-eval", "--search-max-workers", "2",
        "--json", str(path)])
    return summary, json.loads(path.read_text())


def test_the_json_file_is_the_returned_summary_with_every_section(tiny):
    summary, written = tiny
    assert set(written) == {"workload", "rows", "medians", "ratios", "targets", "agreement",
                            "vla_eval_tuning"}
    assert written == json.loads(json.dumps(summary, default=float))
    assert written["workload"]["order"] == SYSTEMS


def test_systems_run_interleaved_round_by_round_on_the_same_steps(tiny):
    rows = tiny[1]["rows"]
    assert [r["system"] for r in rows] == SYSTEMS * 2  # A B C ... A B C ...
    assert [r["round"] for r in rows] == [0] * len(SYSTEMS) + [1] * len(SYSTEMS)
    for round_ in (0, 1):  # one episode list, one step cap: the same steps everywhere
        assert {r["steps"] for r in rows if r["round"] == round_} == {32}
    for row in rows:
        assert row["steps_per_s"] == pytest.approx(row["steps"] / row["eval_s"])
        assert row["e2e_steps_per_s"] == pytest.approx(row["steps"] / row["e2e_s"])
        assert row["e2e_s"] > row["eval_s"] > 0  # start-up is outside the warm clock
    searched = [r for r in rows if r["system"] == "pool chunk searched"]
    assert all(r["search_s"] > 0 and r["probes"] >= 1 for r in searched)


def test_medians_and_ranges_are_those_of_the_rows(tiny):
    rows, medians = tiny[1]["rows"], tiny[1]["medians"]
    assert list(medians) == SYSTEMS
    for system, stats in medians.items():
        for quantity in ("steps_per_s", "e2e_steps_per_s", "eval_s", "e2e_s"):
            values = [r[quantity] for r in rows if r["system"] == system]
            assert stats[quantity] == {"median": pytest.approx(statistics.median(values)),
                                       "min": min(values), "max": max(values)}
        assert stats["runs"] == 2


def test_every_ratio_is_the_quotient_of_the_medians_of_the_rows_it_names(tiny):
    module = load_script()
    rows, ratios = tiny[1]["rows"], tiny[1]["ratios"]
    expected = {n for n, (top, bottom, _) in module.RATIOS.items()
                if top in SYSTEMS and bottom in SYSTEMS}
    assert set(ratios) == expected and "efficiency_vs_ceiling" in ratios
    for name, ratio in ratios.items():
        assert (ratio["numerator"], ratio["denominator"], ratio["quantity"]) == \
            module.RATIOS[name]

        def median(system):
            return statistics.median(r[ratio["quantity"]] for r in rows
                                     if r["system"] == system)

        assert ratio["value"] == pytest.approx(median(ratio["numerator"])
                                               / median(ratio["denominator"]))
    family = {r["numerator"] for n, r in ratios.items() if n.startswith("speedup_vs")}
    assert family == {"pool chunk fixed"}  # one row kind on top of every speedup


def test_targets_follow_their_ratios_and_outcomes_agree(tiny):
    module = load_script()
    summary = tiny[1]
    for name, passed in summary["targets"].items():
        ratio, op, bound = module.TARGETS[name]
        value = summary["ratios"][ratio]["value"]
        assert passed == (value >= bound if op == ">=" else value <= bound)
    assert "ray_over_pool >= 0.85" not in summary["targets"]  # no Ray row, no verdict
    assert set(summary["agreement"]) == set(SYSTEMS) - {"sequential", "ceiling"}
    for found in summary["agreement"].values():  # deterministic expert: identical outcomes
        assert found == {"success_agreement": 1.0, "terminal_agreement": 1.0}
