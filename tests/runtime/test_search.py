import pytest

import workbench
from workbench.config import PoolConfig, SearchConfig
from workbench.runtime.search import _failure
from workbench.runtime.sink import RunReport


def test_search_through_the_runner_returns_a_config_and_probe_table(tmp_path):
    result = workbench.run(dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"],
                                episodes=3, policy="expert", image_size=48, progress=False,
                                output_dir=str(tmp_path), backend="pool",
                                search={"enabled": True, "probe_episodes": 2, "max_workers": 3,
                                        "max_replicas": 2}))
    search, report = result.search, result.report
    assert isinstance(search.best, PoolConfig) and report.pool == search.best
    table = search.probes
    expected = {"workers", "replicas", "max_batch", "steps_per_s", "busy_cores", "peak_mem_gib",
                "successes", "status"}
    assert expected <= set(table.columns)
    assert len(table) >= 2 and table.iloc[0]["workers"] == 1
    assert (table["status"] == "ok").all() and (table["steps_per_s"] > 0).all()
    chosen = table[(table["workers"] == search.best.workers)
                   & (table["replicas"] == search.best.replicas)]
    assert not chosen.empty and chosen["steps_per_s"].max() == pytest.approx(
        table["steps_per_s"].max(), rel=0.5)
    assert 1 <= search.replica_cap and 1 <= search.worker_cap <= 3
    assert search.search_s > 0 and report.complete and report.successes == 6
    assert (table["max_batch"] == [PoolConfig(w, r).batch for w, r in
                                   zip(table["workers"], table["replicas"])]).all()


def test_probe_failing_on_success_is_marked():
    def report(successes):
        rows = [{"episode_id": str(i), "success": s, "error_kind": None, "steps": 10}
                for i, s in enumerate(successes)]
        return RunReport("pool", PoolConfig(1), rows, wall_s=1.0, busy_cores=1.0,
                         peak_rss_bytes=0)

    settings = SearchConfig(success_fraction=0.9)
    assert _failure(report([1, 1, 1, 1]), report([1, 1, 1, 1]), settings) == ""
    assert "below 90%" in _failure(report([1, 0, 0, 1]), report([1, 1, 1, 1]), settings)
