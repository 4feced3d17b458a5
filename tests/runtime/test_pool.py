import os
import signal
import threading

import pandas as pd
import pytest

from helper_policies import DiesAtStep, HashRecorder, RaisesAtStep
from workbench.plan import plan_episodes, shard_episodes
from workbench.policies import ZeroPolicy, make_policy
from workbench.records import RecordStore
from workbench.runtime.parallel import adapter_factory, evaluate_parallel, policy_factory
from workbench.runtime.pool import EvalPool, PoolConfig
from workbench.runtime.sequential import evaluate_sequential

TASKS = ["reach-v3", "push-v3", "drawer-open-v3", "button-press-topdown-v3"]
PLAN = plan_episodes("metaworld", "MT10", TASKS, 2)
MT10 = adapter_factory("metaworld", suite="MT10", image_size=48)


def outcomes(df):
    return {r.episode_id: (bool(r.success), r.terminal_step, int(r.steps)) for r in df.itertuples()}


def fresh(tmp_path, name, plan=PLAN):
    store = RecordStore(tmp_path / f"{name}.sqlite")
    store.create_run("r", plan, {})
    return store


@pytest.fixture(scope="module")
def sequential_graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seq")
    adapter = MT10()
    df = evaluate_sequential(adapter, make_policy("expert", defect="noise", level=0.3), PLAN,
                             fresh(tmp, "seq"), "r", progress=False)
    adapter.close()
    return outcomes(df)


def test_outcomes_identical_across_workers_replicas_batching_and_shards(tmp_path,
                                                                       sequential_graded):
    factory = policy_factory("expert", defect="noise", level=0.3)
    with EvalPool(MT10, factory, max_workers=4, max_replicas=2) as pool:
        configs = [PoolConfig(1, 1, max_batch=1), PoolConfig(2, 1, max_batch=2, max_wait_ms=2),
                   PoolConfig(4, 2, max_batch=4, max_wait_ms=20), PoolConfig(4, 1, max_batch=3)]
        for i, config in enumerate(configs):
            pool.configure(config)
            store = fresh(tmp_path, f"c{i}")
            report = pool.run(PLAN, store, "r")
            assert report.complete and not report.failures
            assert outcomes(store.results("r")) == sequential_graded, config
        pool.configure(PoolConfig(2, 2, max_batch=2))
        sharded = {}
        for k in range(3):
            shard = shard_episodes(PLAN, 3, k)
            store = fresh(tmp_path, f"s{k}", shard)
            pool.run(shard, store, "r")
            sharded.update(outcomes(store.results("r")))
        assert sharded == sequential_graded


def test_observations_read_at_chunk_boundaries_are_pixel_identical(tmp_path):
    plan = plan_episodes("metaworld", "MT10", ["push-v3", "drawer-open-v3"], 1)
    seq_log, pool_log = tmp_path / "seq.log", tmp_path / "pool.log"
    adapter = MT10()
    seq = evaluate_sequential(adapter, HashRecorder(str(seq_log)), plan,
                              fresh(tmp_path, "a", plan), "r", progress=False)
    adapter.close()
    df, report = evaluate_parallel(MT10, lambda_free_factory(pool_log), plan,
                                   fresh(tmp_path, "b", plan), "r",
                                   PoolConfig(2, 1, max_batch=2), progress=False)
    assert outcomes(df) == outcomes(seq)
    seq_lines = sorted(seq_log.read_text().splitlines())
    assert seq_lines == sorted(pool_log.read_text().splitlines())
    steps = sum(int(r["steps"]) for r in report.rows)
    rendered = sum(r["observed_steps"] for r in report.rows)
    assert rendered == len(seq_lines) and rendered <= steps / 4 + len(plan)


def lambda_free_factory(path):
    import functools

    return functools.partial(HashRecorder, str(path))


def test_killed_worker_is_an_infrastructure_error_and_the_rest_complete(tmp_path):
    plan = plan_episodes("metaworld", "MT10", TASKS, 2)  # zero policy: 500 steps each
    store = fresh(tmp_path, "k", plan)
    with EvalPool(MT10, ZeroPolicy, max_workers=2, max_replicas=1) as pool:
        pool.configure(PoolConfig(2, 1, max_batch=2))
        victim = pool.workers[0].process.pid
        timer = threading.Timer(2.0, os.kill, (victim, signal.SIGKILL))
        timer.start()
        report = pool.run(plan, store, "r")
        timer.join()
    df = store.results("r")
    infra = df[df["error_kind"] == "infrastructure"]
    assert len(infra) == 1 and "worker 0 died (exit code -9)" in infra.iloc[0]["error_message"]
    assert infra.iloc[0]["worker"] == "worker-0"
    done = df[df["error_kind"].isna()]
    assert len(done) == len(plan) - 1 and (done["steps"] == 500).all()
    assert set(df["status"]) == {"finished"}
    assert any("worker 0 died" in f for f in report.failures)


def test_replica_exception_is_reported_with_traceback_and_does_not_hang(tmp_path):
    plan = plan_episodes("metaworld", "MT10", ["reach-v3"], 3)
    df, _ = evaluate_parallel(MT10, RaisesAtStep, plan, fresh(tmp_path, "x", plan), "r",
                              PoolConfig(2, 1, max_batch=2), progress=False)
    bad = df.set_index("episode_id").loc[plan[1].episode_id]
    assert bad["error_kind"] == "policy" and bad["steps"] == 5
    assert "FloatingPointError: the policy's own bug" in bad["error_message"]
    assert "raise_deep_in_the_policy" in bad["error_message"]  # the replica's traceback
    others = df[df["episode_id"] != plan[1].episode_id]
    assert others["error_kind"].isna().all() and (others["steps"] == 500).all()


def test_dead_replica_fails_its_episodes_as_infrastructure_and_run_finishes(tmp_path):
    plan = plan_episodes("metaworld", "MT10", ["reach-v3"], 3)
    df, report = evaluate_parallel(MT10, DiesAtStep, plan, fresh(tmp_path, "d", plan), "r",
                                   PoolConfig(1, 1), progress=False)
    assert set(df["status"]) == {"finished"}
    assert (df["error_kind"] == "infrastructure").all()
    assert df["error_message"].str.contains("replica 0 died").any()


def test_incompatible_policy_is_refused_before_any_process_starts(tmp_path):
    from workbench.benchmarks import ContractError

    with pytest.raises(ContractError, match="privileged=True"):
        evaluate_parallel(MT10, lambda_free_vision_reading_privileged, PLAN,
                          fresh(tmp_path, "z"), "r", PoolConfig(1, 1), progress=False)


def lambda_free_vision_reading_privileged():
    from workbench.policies.base import Capabilities

    class Sneaky(ZeroPolicy):
        @property
        def capabilities(self):
            return Capabilities("metaworld-v1", ("privileged.state",))

    return Sneaky()
