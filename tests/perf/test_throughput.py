"""perf/throughput.py from its command line at a tiny size (2 tasks, 8 steps, one chunk, 32 px, two
rounds; no Ray or vla-eval rows, which their own tests and the full run cover): the JSON's
sections and provenance, the random interleaving, the bounds, memory, and every reported
number against the rows it names."""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "perf" / "throughput.py"
SYSTEMS = {"bound chunk", "bound chunk contended", "bound every step", "sequential", "single chunk",
           "independent loops", "pool every step", "pool chunk", "pool chunk b1",
           "pool chunk 1 worker", "pool chunk searched"}
POLICY_BOUND = {"policy-bound bound", "policy-bound pool b1", "policy-bound pool",
                "policy-bound pool lanes", "policy-bound pool lanes b1"}
POOLS = {"pool every step", "pool chunk", "pool chunk b1", "pool chunk 1 worker",
         "pool chunk searched", "policy-bound pool b1", "policy-bound pool",
         "policy-bound pool lanes", "policy-bound pool lanes b1"}
ALL = SYSTEMS | POLICY_BOUND


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("throughput") / "throughput.json"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tasks", "2", "--episodes", "1", "--max-steps", "8",
         "--image-size", "32", "--rounds", "2", "--skip-ray", "--skip-vla-eval",
         "--search-max-workers", "1", "--seed", "3", "--policy-bound", "--mlp", "256x2",
         "--policy-bound-workers", "4", "--memory-interval", "0.25",  # rows of a second
         "--json", str(path)],
        capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(path.read_text())
    assert json.loads(done.stdout.strip().splitlines()[-1]) == summary  # the last line
    return summary, done.stdout, path


def test_the_json_has_every_section_and_its_provenance(tiny):
    summary = tiny[0]
    assert set(summary) == {"provenance", "workload", "rows", "medians", "ratios", "memory",
                            "targets", "agreement", "vla_eval_tuning", "vla_eval_best"}
    found = summary["provenance"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    assert found["commit"] == head and found["cpu_model"] and found["cores_logical"] >= 1
    # every process pinned to one thread (llvmpipe rasterizing in the calling thread), the
    # variables recorded as they were
    assert found["environment"]["OMP_NUM_THREADS"] == "1"
    assert found["environment"]["LP_NUM_THREADS"] == "0"
    assert found["packages"]["mujoco"] and found["packages"]["robo-workbench"]


def test_rows_run_in_a_drawn_order_per_round_on_the_same_steps(tiny):
    summary = tiny[0]
    rows, orders = summary["rows"], summary["workload"]["orders"]
    assert [set(order) for order in orders] == [ALL, ALL]
    assert orders[0] != orders[1]  # drawn per round (seed 3 draws two different orders)
    assert [r["system"] for r in rows] == orders[0] + orders[1]
    for round_ in (0, 1):  # one episode list, one step cap: the same steps everywhere
        assert {r["steps"] for r in rows if r["round"] == round_} == {16}
    for row in rows:
        assert row["steps_per_s"] == pytest.approx(row["steps"] / row["eval_s"])
        assert row["e2e_s"] > row["eval_s"] > 0 or row["system"].startswith("bound")


def test_the_bounds_are_the_cores_over_their_measured_stage_costs(tiny):
    rows = tiny[0]["rows"]
    for round_ in (0, 1):
        mine = {r["system"]: r for r in rows if r["round"] == round_}
        for schedule in ("bound chunk", "bound every step"):
            bound = mine[schedule]
            stages = [bound[f"cpu_{k}_ms"] for k in ("reset", "physics", "observe", "policy")]
            assert all(v > 0 for v in stages) and bound["cpu_harness_ms"] >= 0
            work_s = sum(stages) / 1e3
            assert bound["steps_per_s"] == pytest.approx(tiny[0]["workload"]["cores"] / work_s)
            # that no evaluator beats its bound is a claim about a measurement on a quiet
            # machine: tests/perf/test_readme_table.py holds the committed runs to it. Here
            # (16 steps a row, beside another test worker on a 2-core CI machine) a row can
            # land above the bound by chance: the loops at 1.14x once in CI.
        # the contended bound: the same stages, with one process per core at once
        contended = mine["bound chunk contended"]
        assert contended["processes"] == tiny[0]["workload"]["cores"]
        assert mine["bound chunk"]["processes"] == 1
        work_s = sum(contended[f"cpu_{k}_ms"]
                     for k in ("reset", "physics", "observe", "policy")) / 1e3
        assert contended["steps_per_s"] == pytest.approx(tiny[0]["workload"]["cores"] / work_s)
        # rendering every step costs more observation time per step than at chunk ends
        assert mine["bound every step"]["cpu_observe_ms"] > mine["bound chunk"]["cpu_observe_ms"]
        # the policy-bound regime's bound: its policy at the cheapest batch it measured
        policy = mine["policy-bound bound"]
        per_item = policy["policy_ms_per_item"]
        # 4 workers over one replica per core: batches of up to 4 / cores
        largest = 4 // tiny[0]["workload"]["cores"]
        assert set(per_item) == {str(2 ** k) for k in range(largest.bit_length())}
        assert all(v > 0 for v in per_item.values())
        # expert-mlp-cost acts every step (chunks of 1): one call per step at the best batch
        work_ms = (policy["cpu_reset_ms"] + policy["cpu_physics_ms"] + policy["cpu_observe_ms"]
                   + min(per_item.values()))
        assert policy["steps_per_s"] == pytest.approx(tiny[0]["workload"]["cores"] * 1e3
                                                      / work_ms)


def test_every_ratio_is_the_median_of_its_per_round_quotients(tiny):
    rows, ratios = tiny[0]["rows"], tiny[0]["ratios"]
    assert {"pool_over_bound_chunk", "pool_over_bound_every_step", "rendering_less",
            "batching_factor", "e2e_speedup_vs_sequential"} <= set(ratios)
    assert not any("vla_eval" in name or name == "ray_over_pool" for name in ratios)
    for name, ratio in ratios.items():
        def value(system, round_):
            (row,) = [r for r in rows if r["system"] == system and r["round"] == round_]
            return row[ratio["quantity"]]

        quotients = [value(ratio["numerator"], k) / value(ratio["denominator"], k)
                     for k in (0, 1)]
        assert ratio["value"] == pytest.approx(statistics.median(quotients)), name
        assert (ratio["min"], ratio["max"], ratio["rounds"]) == (
            pytest.approx(min(quotients)), pytest.approx(max(quotients)), 2)


def test_memory_is_peak_pss_per_row_and_per_pool_worker(tiny):
    summary = tiny[0]
    for row in summary["rows"]:
        assert row["peak_pss_mib"] > 50
        # pool workers are named wb-worker-N; the single-process rows have none
        assert (row["worker_pss_mib"] is not None) == (row["system"] in POOLS), row["system"]
    mem = summary["memory"]
    assert set(mem["peak_pss_mib"]) == ALL
    assert mem["pss_per_worker_over_alone"] == pytest.approx(
        mem["worker_pss_mib"] / mem["worker_alone_pss_mib"])


def test_targets_follow_their_numbers_and_outcomes_agree(tiny):
    summary = tiny[0]
    assert set(summary["targets"]) == {"pool_over_bound_chunk >= 0.9",
                                       "pool_over_bound_every_step >= 0.9",
                                       "pss_per_worker_over_alone <= 1.2",
                                       "batching_factor_policy_bound >= 1.5",
                                       "policy_bound_pool_over_bound >= 0.85"}
    for name, passed in summary["targets"].items():
        key, op, bound = name.split()
        value = summary["ratios"][key]["value"] if key in summary["ratios"] \
            else summary["memory"][key]
        assert passed == (value >= float(bound) if op == ">=" else value <= float(bound))
    evaluators = SYSTEMS - {"sequential", "bound chunk", "bound chunk contended",
                            "bound every step", "independent loops"} | {
        "policy-bound pool", "policy-bound pool lanes", "policy-bound pool lanes b1"}
    assert set(summary["agreement"]) == evaluators
    for found in summary["agreement"].values():  # deterministic expert: identical outcomes
        assert found == {"success_agreement": 1.0, "terminal_agreement": 1.0}


def test_the_readme_table_is_generated_from_the_json(tiny):
    summary, _, path = tiny
    done = subprocess.run([sys.executable, str(SCRIPT), "--table", str(path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert summary["provenance"]["commit"][:7] in done.stdout
    for name, ratio in summary["ratios"].items():
        assert f"| `{name}` | {ratio['value']:.2f} ({ratio['min']:.2f}-" in done.stdout



def test_the_policy_bound_pools_split_their_core_time(tiny):
    summary = tiny[0]
    cores = summary["workload"]["cores"]
    for row in summary["rows"]:
        if row["system"] not in POOLS & POLICY_BOUND:
            continue
        parts = [row[f"split_{k}_ms"] for k in ("policy", "rest", "unused")]
        # the three parts are the row's core time per step, nothing left out or counted twice
        assert sum(parts) == pytest.approx(cores * 1e3 / row["steps_per_s"])
        assert row["split_policy_ms"] > 0 and row["split_rest_ms"] > 0
        if row["system"].endswith(" b1"):  # the batching factors' denominators
            assert row["mean_batch"] == 1.0
        # 2 episodes on 4 workers (or 2 workers of 2 environments, each holding one more
        # queued) are all claimed at once: no steady part to rate
        assert row["steady_steps_per_s"] is None and row["tail_share"] == 1.0
    # so the steady ratio has no round to divide, while the whole-run ratio has both
    assert "policy_bound_steady_over_bound" not in summary["ratios"]
    assert summary["ratios"]["policy_bound_pool_over_bound"]["rounds"] == 2


def test_the_steady_part_ends_at_the_last_claim():
    throughput = _load_script()
    # worker 1 runs A (0-10 s, 100 steps); worker 2 runs B (0-5 s, 50 steps), then C, the
    # last claim (5-12 s, 70 steps): before 5 s, half of A and all of B ran
    df = pd.DataFrame({"claimed_at": [0.0, 0.0, 5.0], "finished_at": [10.0, 5.0, 12.0],
                       "steps": [100, 50, 70]})

    class Clock:  # 20 core ticks a second; this process busy 0.1 s a second
        samples = [(t, 10 * t if t < 5 else 50 + 5 * (t - 5), 20 * t, 0.1 * t)
                   for t in range(13)]
        idle_share = throughput.CoreClock.idle_share
        process_cpu_s = throughput.CoreClock.process_cpu_s

    found = throughput.steady_and_tail(df, Clock())
    assert found["tail_share"] == pytest.approx(7 / 12)
    assert found["steady_steps_per_s"] == pytest.approx((50 + 50) / 5)
    # idle ticks: 10 per second of 20 before the last claim, then 5 of 20
    assert found["idle_share_steady"] == pytest.approx(0.5)
    assert found["idle_share_tail"] == pytest.approx(0.25)
    # over the whole 12 s (220 steps) on 2 cores: idle 85 of 240 ticks; the driver 1.2 s
    unused = throughput.unused_core_time(df, Clock(), cores=2)
    assert unused["unused_idle_ms"] == pytest.approx(1e3 * (85 / 240) * 2 * 12 / 220)
    assert unused["unused_driver_ms"] == pytest.approx(1e3 * 1.2 / 220)


def _load_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("throughput_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
