import html
import json
import subprocess
import sys

import pandas as pd
import psutil
import yaml

import workbench

from workbench.config import PoolConfig, SearchConfig
from workbench.records.store import RecordStore
from workbench.runtime.search import _failure
from workbench.runtime.sink import RunReport


def test_search_through_the_command_line_shows_and_keeps_its_work(tmp_path):
    # the expert declares runtime_invariant: its probes' episodes are the run's own
    config = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"],
                  episodes=12, policy="expert", image_size=48, progress=False,
                  output_dir=str(tmp_path / "run"), backend="pool",
                  search={"enabled": True, "probe_episodes": 2, "max_workers": 3,
                          "max_replicas": 2})
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "eval", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout
    store = RecordStore(tmp_path / "run" / "records.sqlite")
    try:
        (search,) = store.searches()
        results = store.results(search["run_id"])
        attempts = store.attempts(search["run_id"])
    finally:
        store.close()
    table = pd.DataFrame(search["probes"])
    best = search["best"]
    # the terminal shows the decisions, the probe table and the choice, as recorded
    assert "concurrency search:" in printed and "steps_per_s" in printed
    assert f"chosen: {best['workers']} workers, {best['replicas']} replicas" in printed
    assert all(decision in printed for decision in search["decisions"])
    assert search["decisions"][-1].startswith("stop:") and len(search["decisions"]) > len(table)
    expected = {"workers", "replicas", "max_batch", "steps_per_s", "busy_cores", "peak_mem_gib",
                "successes", "status", "gpu_util_pct", "gpu_peak_gib", "replica_peak_bytes"}
    assert expected <= set(table.columns)
    assert len(table) >= 2 and table.iloc[0]["workers"] == 1
    assert (table["status"] == "ok").all() and (table["steps_per_s"] > 0).all()
    assert table["gpu_util_pct"].isna().all()  # no GPU here: unmeasured, not zero
    chosen = table[(table["workers"] == best["workers"]) & (table["replicas"] == best["replicas"])]
    assert not chosen.empty and (table["workers"] <= 3).all()
    assert 1 <= search["replica_cap"] and 1 <= search["worker_cap"] <= 3
    assert search["search_s"] > 0 and results["success"].sum() == 24
    # probes that count: their episodes were claimed once each and recorded as the run's
    assert search["counted"] and "recorded them as the run's" in search["decisions"][0]
    assert len(attempts) == 24 and attempts["episode_id"].is_unique
    probed = int(table["episodes"].sum())
    assert 0 < probed < 24 and results["status"].eq("finished").all()
    assert (table["max_batch"] == [PoolConfig(w, r).batch for w, r in
                                   zip(table["workers"], table["replicas"])]).all()
    # and the run's report keeps it
    page = (tmp_path / "run" / "report.html").read_text()
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert "Concurrency search" in page and search["decisions"][-1] in html.unescape(page)
    assert report["searches"][0]["best"] == best


def test_probe_failing_on_success_is_marked():
    def report(successes):
        rows = [{"episode_id": str(i), "success": s, "error_kind": None, "steps": 10}
                for i, s in enumerate(successes)]
        return RunReport("pool", PoolConfig(1), rows, wall_s=1.0, busy_cores=1.0,
                         peak_rss_bytes=0)

    settings = SearchConfig(success_fraction=0.9)
    assert _failure(report([1, 1, 1, 1]), report([1, 1, 1, 1]), settings) == ""
    assert "below 90%" in _failure(report([1, 0, 0, 1]), report([1, 1, 1, 1]), settings)


def test_probes_of_a_policy_that_may_depend_on_the_runtime_are_not_recorded(tmp_path):
    # ResidualExpert batches natively and declares nothing: its probes run plan episodes
    # and discard them; the run then runs every episode itself
    run = workbench.run(dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"],
                             episodes=4, policy="wb_plugin.policies:ResidualExpert",
                             image_size=32, progress=False, output_dir=str(tmp_path),
                             backend="pool", search={"enabled": True, "probe_episodes": 2,
                                                     "max_workers": 2, "max_replicas": 1}))
    assert not run.search.counted and "discarded" in run.search.decisions[0]
    assert run.search.probes["episodes"].sum() >= 4  # the probes ran episodes...
    assert len(run.report.rows) == 4  # ...and the run ran all four itself
    store = RecordStore(run.records_path)
    try:
        assert len(store.attempts(run.run_id)) == 4
    finally:
        store.close()


def test_probes_that_do_not_count_stop_at_probe_max_steps_and_the_run_does_not(tmp_path):
    run = workbench.run(dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"],
                             episodes=4, policy="wb_plugin.policies:ResidualExpert",
                             image_size=32, progress=False, output_dir=str(tmp_path),
                             backend="pool", search={"enabled": True, "probe_episodes": 2,
                                                     "max_workers": 2, "max_replicas": 1,
                                                     "probe_max_steps": 6}))
    probes = run.search.probes
    assert not run.search.counted and len(probes) >= 2
    assert (probes["steps"] == 6 * probes["episodes"]).all()  # every probe episode cut at 6
    assert (run.results["steps"] > 6).all() and run.results["success"].all()  # the run's not


def test_a_searched_pool_starts_the_second_probes_workers():
    from workbench.runtime.job import build_components
    from workbench.runtime.parallel import start_pool

    config = workbench.load_config(dict(
        benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=1, policy="expert",
        image_size=32, progress=False, backend="pool",
        search={"enabled": True, "max_workers": 3, "worker_candidates": [1, 3]}))
    with start_pool(build_components(config), config) as pool:
        started = len(pool.workers)
    assert started == min(3, psutil.cpu_count())  # never more than the cores


def test_episodes_start_longest_expected_first_and_outcomes_do_not_change(tmp_path):
    # the expert needs about 48 steps on reach and 90 on window-open; the plan lists
    # reach first, the probes (episodes of the run) measure both, and the rest of the
    # run starts window-open first
    config = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "window-open-v3"],
                  episodes=6, policy="expert", image_size=32, progress=False,
                  output_dir=str(tmp_path), interactions=False)
    reference = workbench.run(dict(config, run_id="sequential")).results
    run = workbench.run(dict(config, run_id="searched", backend="pool",
                             search={"enabled": True, "probe_episodes": 2, "max_workers": 2,
                                     "max_replicas": 1}))
    steps = run.search.task_steps
    assert steps["window-open-v3"] > 1.5 * steps["reach-v3"]
    store = RecordStore(run.records_path)
    try:
        claims = store.attempts("searched").sort_values("claimed_at")["episode_id"].tolist()
    finally:
        store.close()
    probed = int(run.search.probes["episodes"].sum())
    rest = [e for e in reference["episode_id"] if e not in claims[:probed]]
    assert rest[0].endswith("reach-v3/0003") and len(rest) == 6  # the plan's order
    # the run's own episodes: window-open's, then reach's, each in the plan's order
    assert claims[probed:] == rest[3:] + rest[:3]
    outcome = ["episode_id", "success", "terminal_step", "steps"]
    assert run.results[outcome].equals(reference[outcome])
