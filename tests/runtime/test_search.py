import pytest

from workbench.plan import plan_episodes
from workbench.runtime.parallel import adapter_factory, policy_factory
from workbench.runtime.pool import EvalPool, PoolConfig
from workbench.runtime.search import SearchSettings, search_concurrency


def test_search_on_a_tiny_workload_returns_a_config_and_probe_table():
    plan = plan_episodes("metaworld", "MT10", ["reach-v3", "push-v3"], 3)
    settings = SearchSettings(probe_episodes=2, probe_time_limit_s=120)
    with EvalPool(adapter_factory("metaworld", suite="MT10", image_size=48),
                  policy_factory("expert"), max_workers=3, max_replicas=2) as pool:
        result = search_concurrency(pool, plan, settings, cores=2)
        pool.configure(result.best)
        report = pool.run(plan)
    assert isinstance(result.best, PoolConfig)
    table = result.probes
    expected = {"workers", "replicas", "max_batch", "steps_per_s", "busy_cores", "peak_mem_gib",
                "successes", "status"}
    assert expected <= set(table.columns)
    assert len(table) >= 2 and table.iloc[0]["workers"] == 1
    assert (table["status"] == "ok").all() and (table["steps_per_s"] > 0).all()
    chosen = table[(table["workers"] == result.best.workers)
                   & (table["replicas"] == result.best.replicas)]
    assert not chosen.empty and chosen["steps_per_s"].max() == pytest.approx(
        table["steps_per_s"].max(), rel=0.5)
    assert 1 <= result.replica_cap and 1 <= result.worker_cap <= 3
    assert result.search_s > 0 and report.complete and report.successes == len(plan)


def test_probe_failing_on_success_is_marked():
    from workbench.runtime.pool import RunReport
    from workbench.runtime.search import _failure

    def R(successes):
        rows = [{"episode_id": str(i), "success": s, "error_kind": None, "steps": 10}
                for i, s in enumerate(successes)]
        return RunReport(PoolConfig(1), rows, wall_s=1.0, steps=40, busy_cores=1.0,
                         peak_rss_bytes=0)

    settings = SearchSettings(success_fraction=0.9)
    assert _failure(R([1, 1, 1, 1]), R([1, 1, 1, 1]), settings) == ""
    assert "below 90%" in _failure(R([1, 0, 0, 1]), R([1, 1, 1, 1]), settings)
