"""The pool backend through the runner: outcomes, batching, pixels, and failures."""

import functools
import os
import signal
import time

import pandas as pd
import pytest

import workbench
from helper_policies import DiesAtStep, HashRecorder, OutOfMemoryAtStep, RaisesAtStep
from run_outcomes import outcomes, run_killing_worker_0
from workbench.config import PoolConfig
from workbench.contracts.plan import plan_episodes
from workbench.runtime.episode import EpisodeOptions

TASKS = ["reach-v3", "push-v3", "drawer-open-v3", "button-press-topdown-v3"]
COMMON = dict(benchmark="metaworld", suite="MT10", tasks=TASKS, episodes=2, image_size=48,
              progress=False)
GRADED = dict(COMMON, policy="expert", policy_options={"defect": "noise", "level": 0.3})
BATCHING = dict(COMMON, policy="wb_plugin.policies:ResidualExpert")
# (workers, replicas, max batch): one to four workers, one or two replicas, batches of 1 to 8
CONFIGS = [(1, 1, 1), (2, 1, 2), (4, 2, 2), (4, 1, 4), (8, 1, 8)]


def pool_config(workers, replicas, batch, wait_ms=20.0):
    return PoolConfig(workers, replicas, max_batch=batch, max_wait_ms=wait_ms)


@pytest.fixture(scope="module", params=["graded", "batching"])
def workload(request, tmp_path_factory):
    """A workload and its sequential outcomes (the reference)."""
    config = GRADED if request.param == "graded" else BATCHING
    out = tmp_path_factory.mktemp(request.param)
    reference = workbench.run(dict(config, output_dir=str(out), run_id="sequential"))
    return request.param, config, out, outcomes(reference.results)


def test_outcomes_identical_across_workers_replicas_batching_and_shards(workload):
    name, config, out, reference = workload
    batches = {}
    base = dict(config, backend="pool", output_dir=str(out))
    with workbench.open_pool(base, max_workers=8, max_replicas=2) as pool:
        for workers, replicas, batch in CONFIGS:
            result = workbench.run(dict(base, run_id=f"pool-{workers}-{replicas}-{batch}",
                                        pool=pool_config(workers, replicas, batch)), pool=pool)
            assert result.report.complete and not result.report.failures
            assert outcomes(result.results) == reference, (workers, replicas, batch)
            batches[(workers, replicas, batch)] = result.report.batch_sizes()
        sharded = {}
        for k in range(3):
            result = workbench.run(dict(base, run_id=f"shard-{k}", shards=3, shard=k,
                                        pool=pool_config(2, 2, 2)), pool=pool)
            sharded.update(outcomes(result.results))
        assert sharded == reference
    for (workers, replicas, batch), sizes in batches.items():
        assert max(sizes) <= batch
    if name == "batching":  # the policy batches natively: real batches formed, and a
        # larger cap is used beyond the smaller one (how full a batch gets within max_wait
        # depends on the load: a loaded 2-core CI machine filled 6 of 8 once)
        print(f"batch sizes served per configuration: {batches}")
        assert max(batches[(8, 1, 8)]) > 4 and max(batches[(4, 1, 4)]) > 2
        assert sum(n for size, n in batches[(2, 1, 2)].items() if size == 2) > 0
    else:  # the scripted expert declares max_batch 1: the replica never batches it
        assert all(set(sizes) == {1} for sizes in batches.values())


def test_one_poisoned_episode_fails_alone_inside_real_batches(tmp_path):
    config = dict(BATCHING, output_dir=str(tmp_path))
    clean = outcomes(workbench.run(dict(config, run_id="clean")).results)
    victim = "metaworld/MT10/push-v3/0001"
    poisoned = workbench.run(dict(config, backend="pool", run_id="poisoned",
                                  policy_options={"poison": [victim, 10]},
                                  pool=pool_config(4, 1, 4)))
    df = poisoned.results.set_index("episode_id")
    assert df.loc[victim, "error_kind"] == "policy" and df.loc[victim, "steps"] == 10
    assert "poisoned observation" in df.loc[victim, "error_message"]
    others = poisoned.results[poisoned.results["episode_id"] != victim]
    assert others["error_kind"].isna().all()
    assert outcomes(others) == {k: v for k, v in clean.items() if k != victim}
    assert max(poisoned.report.batch_sizes()) > 1  # the victim shared batches with others


def test_observations_read_at_chunk_boundaries_are_pixel_identical(tmp_path):
    seq_log, pool_log = tmp_path / "seq.log", tmp_path / "pool.log"
    common = dict(COMMON, tasks=["push-v3", "drawer-open-v3"], episodes=1, max_steps=32,
                  output_dir=str(tmp_path))
    seq = workbench.run(dict(common, policy=functools.partial(HashRecorder, str(seq_log)),
                             run_id="seq"))
    pool = workbench.run(dict(common, policy=functools.partial(HashRecorder, str(pool_log)),
                              backend="pool", run_id="pool", pool=pool_config(2, 1, 2)))
    assert outcomes(pool.results) == outcomes(seq.results)
    seq_lines = sorted(seq_log.read_text().splitlines())
    assert seq_lines == sorted(pool_log.read_text().splitlines())
    steps = pool.report.steps
    rendered = sum(r["observations"] for r in pool.report.rows)
    assert rendered == len(seq_lines) and rendered <= steps / 4 + 2
    assert sum(seq.results["observations"]) == seq.report.steps  # sequential: every step


def test_killed_worker_is_an_infrastructure_error_and_the_rest_complete(tmp_path):
    config = dict(COMMON, policy="zero", output_dir=str(tmp_path), backend="pool",
                  pool=pool_config(2, 1, 2))  # zero policy: 500 steps each
    result = run_killing_worker_0(config, 1)
    df = result.results
    infra = df[df["error_kind"] == "infrastructure"]
    assert len(infra) == 1 and "worker 0 died (exit code -9)" in infra.iloc[0]["error_message"]
    assert infra.iloc[0]["worker"] == "worker-0"
    done = df[df["error_kind"].isna()]
    assert len(done) == len(df) - 1 and (done["steps"] == 500).all()
    assert set(df["status"]) == {"finished"}
    assert any("worker 0 died" in f for f in result.report.failures)
    summary = workbench.summarize(df).set_index("task")
    assert summary.loc["ALL", "infra_errors"] == 1  # left out of the success rate


def test_replica_exception_is_a_policy_error_with_its_traceback(tmp_path):
    result = workbench.run(dict(COMMON, tasks=["reach-v3"], episodes=3, policy=RaisesAtStep,
                                output_dir=str(tmp_path), backend="pool",
                                pool=pool_config(2, 1, 2)))
    df = result.results.set_index("episode_id")
    bad = df.loc["metaworld/MT10/reach-v3/0001"]
    assert bad["error_kind"] == "policy" and bad["steps"] == 5
    assert "FloatingPointError: the policy's own bug" in bad["error_message"]
    assert "raise_deep_in_the_policy" in bad["error_message"]  # the replica's traceback
    others = df.drop(index="metaworld/MT10/reach-v3/0001")
    assert others["error_kind"].isna().all() and (others["steps"] == 500).all()


@pytest.mark.parametrize("backend", ["sequential", "pool"])
def test_out_of_memory_in_the_policys_code_is_the_policys_failure_of_its_episode(tmp_path,
                                                                                 backend):
    result = workbench.run(dict(COMMON, tasks=["reach-v3"], episodes=3, max_steps=20,
                                policy=OutOfMemoryAtStep, output_dir=str(tmp_path),
                                backend=backend, pool=pool_config(2, 1, 2)))
    df = result.results.set_index("episode_id")
    bad = df.loc["metaworld/MT10/reach-v3/0001"]
    assert bad["error_kind"] == "policy" and bad["steps"] == 5  # it cannot excuse itself
    assert "out of memory" in bad["error_message"].lower()
    assert df.drop(index=bad.name)["error_kind"].isna().all()


def test_a_pool_starts_processes_only_as_configurations_ask_for_them(tmp_path):
    config = dict(COMMON, tasks=["reach-v3", "push-v3"], episodes=2, max_steps=40,
                  policy="expert", output_dir=str(tmp_path), backend="pool",
                  pool=pool_config(1, 1, 1))
    reference = outcomes(workbench.run(dict(config, backend="sequential", run_id="seq")).results)
    plan = plan_episodes("metaworld", "MT10", ["reach-v3", "push-v3"], 2)
    with workbench.open_pool(config, max_workers=3, max_replicas=2) as pool:
        assert (len(pool.workers), len(pool.replicas)) == (1, 1)
        small = workbench.run(dict(config, run_id="small"), pool=pool)
        assert (len(pool.workers), len(pool.replicas)) == (1, 1)
        grown = workbench.run(dict(config, run_id="grown", pool=pool_config(3, 2, 2)), pool=pool)
        assert (len(pool.live_workers()), len(pool.live_replicas())) == (3, 2)
        # every pipe the growth wired: the old worker to the new replica, the new workers
        # to the old replica (round robin alone would not use the first)
        pool._assign([0, 1, 2], [1, 0])
        crossed = pool.run(plan, options=EpisodeOptions(False, "probe", max_steps=40))
        with pytest.raises(ValueError, match="3 live workers and 2 live replicas"):
            pool.configure(pool_config(4, 2, 2))  # beyond the limits: refused, not started
    assert outcomes(small.results) == outcomes(grown.results) == reference
    assert outcomes(pd.DataFrame(crossed.rows)) == reference
    assert set(grown.results["worker"]) == {"worker-0", "worker-1", "worker-2"}
    assert all(stats.requests > 0 for stats in crossed.replica_stats)


def test_a_dead_replica_fails_its_episode_and_stops_the_run_leaving_the_rest(tmp_path):
    """Its only replica gone, the pool claims nothing more: the rest is left unattempted
    for a resume, not burnt as infrastructure errors."""
    result = workbench.run(dict(COMMON, tasks=["reach-v3"], episodes=3, policy=DiesAtStep,
                                output_dir=str(tmp_path), backend="pool",
                                pool=pool_config(1, 1, 1)))
    df = result.results.set_index("episode_id")
    first = df.loc["metaworld/MT10/reach-v3/0000"]
    assert (first["status"], first["error_kind"]) == ("finished", "infrastructure")
    assert "replica 0 died" in first["error_message"]
    assert df["status"].tolist().count("planned") == 2
    assert not result.report.complete
    assert any("no live policy replica left: 2 planned" in f for f in result.report.failures)


def test_a_replica_that_dies_after_the_last_episode_has_no_stats_and_is_marked_dead(tmp_path):
    """The race CI hit: the run's last episode ends before the pool sees its replica's
    exit. Asking that replica for statistics must not fail the finished run."""
    config = dict(COMMON, tasks=["reach-v3"], episodes=1, max_steps=20, policy="expert",
                  output_dir=str(tmp_path), backend="pool", pool=pool_config(1, 1, 1))
    plan = plan_episodes("metaworld", "MT10", ["reach-v3"], 1)
    with workbench.open_pool(config) as pool:
        pool.configure(pool_config(1, 1, 1))
        replica = pool.replicas[0]
        os.kill(replica.process.pid, signal.SIGKILL)
        replica.process.join(timeout=10)
        assert replica.process.exitcode == -signal.SIGKILL and replica.alive  # not seen yet
        assert pool.replica_stats() == []
        assert not replica.alive and pool.live_replicas() == []
        report = pool.run(plan, options=EpisodeOptions(False, "probe", max_steps=20))
    assert report.rows == [] and not report.complete  # nothing claimed with no replica
    assert "no live policy replica left" in report.failures[0]


def test_frames_larger_than_the_transport_are_an_infrastructure_error_of_one_episode(tmp_path):
    result = workbench.run(dict(COMMON, tasks=["reach-v3"], episodes=3,
                                benchmark="wb_plugin.benchmarks:FaultyMetaWorld",
                                benchmark_options={"oversize": ["reach-v3", 1, 8]},
                                policy="expert-vision-cost", policy_options={"chunk_size": 4},
                                output_dir=str(tmp_path), backend="pool",
                                pool=pool_config(2, 1, 2)))
    df = result.results.set_index("episode_id")
    bad = df.loc["metaworld/MT10/reach-v3/0001"]
    assert bad["error_kind"] == "infrastructure" and bad["steps"] == 8
    assert "slot holds" in bad["error_message"]
    assert df.drop(index=bad.name)["error_kind"].isna().all()
    assert df.drop(index=bad.name)["success"].all()


def test_incompatible_policy_is_refused_before_any_process_starts(tmp_path):
    from workbench.contracts import ContractError

    with pytest.raises(ContractError, match="privileged=True"):
        workbench.run(dict(COMMON, policy="helper_policies:Sneaky", output_dir=str(tmp_path),
                           backend="pool"))
    assert not (tmp_path / "records.sqlite").exists()  # nothing was planned or claimed


def test_a_policy_class_defined_in_a_notebook_runs_in_pool_processes(tmp_path):
    import numpy as np

    from workbench.contracts import Capabilities
    from workbench.policies import Policy

    class LiftUp(Policy):  # defined in a function: not importable by name, as in a notebook
        name = "lift-up"

        def __init__(self, protocol):
            super().__init__()
            self.protocol = protocol

        @property
        def capabilities(self):
            return Capabilities(self.protocol, ("state",), chunk_size=5)

        def _act(self, observation, episode_state):
            return np.tile(np.array([0, 0, 1, 0], np.float32), (5, 1))

    result = workbench.run(dict(COMMON, tasks=["reach-v3"], episodes=2, max_steps=20,
                                policy=LiftUp, output_dir=str(tmp_path), backend="pool",
                                pool=pool_config(2, 1, 1)))
    df = result.results
    assert (df["steps"] == 20).all() and (df["policy_calls"] == 4).all()
    assert df["error_kind"].isna().all() and set(df["policy"]) == {"lift-up"}
    assert set(df["worker"]) == {"worker-0", "worker-1"}
    rollout = np.load(df["rollout_path"].iloc[0])
    assert rollout["state"][-1, 2] > rollout["state"][0, 2]  # it did lift the gripper


def test_a_warm_pool_serves_only_the_config_it_was_opened_for(tmp_path):
    base = dict(COMMON, tasks=["reach-v3"], episodes=1, backend="pool", output_dir=str(tmp_path))
    with workbench.open_pool(dict(base, policy="expert"), 1, 1) as pool:
        with pytest.raises(ValueError, match="opened for another benchmark or policy"):
            workbench.run(dict(base, policy="zero"), pool=pool)


def test_each_worker_builds_a_tasks_environment_once():
    plan = plan_episodes("metaworld", "MT10", TASKS, 2)
    reach = [spec for spec in plan if spec.task == "reach-v3"]
    config = dict(COMMON, policy="expert", pool={"workers": 1, "replicas": 1})
    with workbench.open_pool(config, 2, 1) as pool:
        assert pool.warm_up(reach) == {0: ["reach-v3"]}
        assert pool.warm_up(plan) == {0: sorted(set(TASKS) - {"reach-v3"})}
        assert pool.warm_up(plan) == {0: []}  # warm already: nothing rebuilt
        pool.grow(2, 1)  # a new worker builds its own, the old one nothing
        assert pool.warm_up(plan) == {0: [], 1: sorted(TASKS)}


def test_a_run_measures_only_the_processes_its_configuration_uses(monkeypatch):
    # a searched pool starts the second probe's workers with the first; the first probe
    # (1 worker) must not count the idle one's memory or CPU as its own
    import workbench.runtime.pool as pool_module

    monitored = []

    class Recording(pool_module.ResourceMonitor):
        def __init__(self, pids, **kwargs):
            monitored.append(sorted(pids))
            super().__init__(pids, **kwargs)

    monkeypatch.setattr(pool_module, "ResourceMonitor", Recording)
    plan = [spec for spec in plan_episodes("metaworld", "MT10", TASKS, 1)
            if spec.task == "reach-v3"]
    config = dict(COMMON, policy="expert", pool={"workers": 2, "replicas": 1})
    with workbench.open_pool(config) as pool:
        pool.configure(PoolConfig(1, 1))
        idle = pool.workers[1].process.pid
        used = sorted([pool.workers[0].process.pid, pool.replicas[0].process.pid])
        assert sorted(pool.pids()) == sorted(used + [idle])
        assert sorted(pool.pids(in_use=True)) == used
        one = pool.run(plan)
        pool.configure(PoolConfig(2, 1))
        both = pool.run(plan)
    assert monitored == [used, sorted(used + [idle])]
    assert one.peak_rss_bytes > 0 and both.peak_rss_bytes > 0 and one.busy_cores > 0


def test_a_batch_waits_only_for_workers_that_have_asked_and_are_due():
    from workbench.runtime.replica import _Arrivals, _Batching, _batch_target

    cfg, arrivals = _Batching(workers={object(): 0, object(): 1, object(): 2}), _Arrivals()
    # worker 0's request is in hand; worker 2 is resetting or between episodes; worker 1's
    # think time is unknown, so it is waited for
    assert _batch_target(cfg, {0, 1}, {0}, arrivals, deadline=0.005) == 2
    assert _batch_target(cfg, {0, 5}, {0}, arrivals, deadline=0.005) == 1  # 5: not attached
    assert _batch_target(cfg, set(), set(), arrivals, deadline=0.005) == 1  # never zero
    # worker 1 took 0.1 s, then 0.2 s, to ask again after a reply: think time 0.15 s
    arrivals.answered(1, 0.0)
    arrivals.asked(1, 0.1)
    arrivals.answered(1, 0.2)
    arrivals.asked(1, 0.4)
    assert arrivals.think[1] == pytest.approx(0.15)
    arrivals.answered(1, 1.0)  # replied at 1.0: due at 1.15
    assert _batch_target(cfg, {0, 1}, {0}, arrivals, deadline=1.005) == 1  # served at once
    assert _batch_target(cfg, {0, 1}, {0}, arrivals, deadline=1.2) == 2  # due in time
    assert _batch_target(_Batching(max_batch=1, workers=cfg.workers), {0, 1}, {0}, arrivals,
                         deadline=1.2) == 1
    arrivals.forget(1)  # its episode ended: its next request follows a reset
    assert arrivals.due_by(1, 1.005) and arrivals.think[1] == pytest.approx(0.15)


def test_closing_a_pool_gives_all_its_hung_processes_one_grace_together():
    """Two replicas whose policy hangs in ``unload`` (called as they stop): the pool kills
    both after one grace period, not one each."""
    config = dict(COMMON, tasks=["reach-v3"], episodes=1, policy="hostile_policies:Misbehaves",
                  policy_options={"hows": ["hang"], "where": "unload"},
                  pool={"workers": 1, "replicas": 2})
    pool = workbench.open_pool(config, 1, 2)
    assert len(pool.replicas) == 2
    start = time.monotonic()
    pool.close(grace_s=3.0)
    took = time.monotonic() - start
    assert [p.process.exitcode for p in pool.replicas] == [-signal.SIGKILL] * 2  # really hung
    assert pool.workers[0].process.exitcode == 0  # the worker stopped when told
    assert 3.0 <= took < 5.5, took  # one grace (3 s), not one per replica (6 s)
