"""The Ray backend on a real local Ray instance, through the runner: worker and replica
actors, results streamed to the driver, an actor killed mid-run, a driver killed and
resumed."""

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading

import pytest
import yaml

ray = pytest.importorskip("ray", reason="ray is installed with the test extra")

import workbench  # noqa: E402
from workbench.contracts.results import PolicyLoadFailed  # noqa: E402
from run_outcomes import claimed, finished, outcomes, wait_for  # noqa: E402

COMMON = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"], episodes=2,
              image_size=32, progress=False)


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():  # one an earlier test's run started
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_shards_give_the_sequential_outcomes_and_write_rollouts(tmp_path, local_ray):
    # the scripted expert plus an exact torch correction, batched natively, defined
    # outside workbench/ (as a user's policy is)
    policy = "wb_plugin.policies:ResidualExpert"
    # door-open's scripted policy writes into the observation it is given: Ray's
    # object-store arrays are read-only, so the replica actor must hand over copies
    common = dict(COMMON, policy=policy, policy_options={}, tasks=["reach-v3", "door-open-v3"])
    reference = workbench.run(dict(common, output_dir=str(tmp_path / "seq"))).results
    result = workbench.run(dict(common, output_dir=str(tmp_path / "ray"), backend="ray",
                                video=1, pool={"workers": 2, "max_wait_ms": 20},
                                ray={"shards": 2, "cpus_per_shard": 1}))
    df = result.results
    assert set(df["status"]) == {"finished"} and df["error_kind"].isna().all()
    assert outcomes(df) == outcomes(reference)
    assert df["worker"].str.match(r"ray-shard-[01]/worker-[01]$").all()
    assert df["worker"].str[:11].nunique() == 2  # both shards ran episodes
    assert df["rollout_path"].notna().all()
    assert all((tmp_path / "ray" / "rollouts").glob("*.npz"))
    assert df["video_path"].notna().sum() == 1  # the plan's first episode, as elsewhere
    assert {r["worker"].split("/")[1] for r in result.report.rows} <= {"worker-0", "worker-1"}
    assert max(result.report.batch_sizes()) == 2  # the replica actor batched two workers


SLOW = dict(COMMON, policy="helper_policies:SlowZero", policy_options={"delay_s": 0.01},
            max_steps=150)  # 1.5 s per episode


def test_a_killed_worker_actor_fails_its_episode_alone_and_the_rest_complete(tmp_path,
                                                                            local_ray):
    db = str(tmp_path / "records.sqlite")

    def kill_worker_0():  # once worker 0 of shard 0 holds an episode
        wait_for(lambda: claimed(db, "ray-shard-0/worker-0") > 0)
        (name,) = [n for n in ray.util.list_named_actors() if n.endswith("shard0-worker0")]
        ray.kill(ray.get_actor(name))

    killer = threading.Thread(target=kill_worker_0)
    killer.start()
    result = workbench.run(dict(SLOW, output_dir=str(tmp_path), backend="ray",
                                pool={"workers": 2}, ray={"shards": 1, "cpus_per_shard": 1}))
    killer.join()
    df = result.results
    infra = df[df["error_kind"] == "infrastructure"]
    assert len(infra) == 1 and infra.iloc[0]["worker"] == "ray-shard-0/worker-0"
    assert "ray worker actor 0 of shard 0 died during the episode" in infra.iloc[0][
        "error_message"]
    done = df[df["error_kind"].isna()]
    assert len(done) == 3 and (done["steps"] == 150).all()
    assert set(done["worker"]) == {"ray-shard-0/worker-1"}  # the live worker took the rest
    assert set(df["status"]) == {"finished"}


def test_a_killed_driver_loses_no_finished_episode_and_resumes(tmp_path, local_ray):
    config = tmp_path / "ray.yaml"
    config.write_text(yaml.safe_dump(dict(
        SLOW, tasks=["reach-v3", "push-v3"], episodes=3, output_dir=str(tmp_path / "run"),
        pool={"workers": 2}, ray={"shards": 1, "cpus_per_shard": 1})))
    db = str(tmp_path / "run" / "records.sqlite")
    # the drivers join this test's Ray cluster; their actors die with the killed driver
    address = ray.get_runtime_context().gcs_address
    command = [sys.executable, "-m", "workbench.cli", "eval", str(config), "--backend", "ray",
               "--address", address]
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        wait_for(lambda: len(finished(db)) >= 2 and claimed(db) > 0, timeout_s=240)
        before = finished(db)
        in_flight = claimed(db)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    assert driver.returncode == -signal.SIGKILL
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    rows = {r[0]: r for r in finished(db)}
    assert len(rows) == 6
    assert all(rows[episode] == (episode, at, steps) for episode, at, steps in before)
    with sqlite3.connect(db) as conn:
        interrupted = conn.execute("SELECT count(*) FROM episodes WHERE interrupted=1"
                                   ).fetchone()[0]
        claims = conn.execute("SELECT episode_id, count(*) FROM attempts GROUP BY episode_id"
                              ).fetchall()
    assert interrupted == in_flight >= 1  # the episodes in flight: recorded, not re-run
    assert len(claims) == 6 and all(n == 1 for _, n in claims)


def test_shards_the_cluster_cannot_hold_are_refused_before_any_claim(tmp_path, local_ray):
    with pytest.raises(ValueError, match=r"4 shards need 8 CPUs at once .* the cluster has 2"):
        workbench.run(dict(COMMON, policy="zero", output_dir=str(tmp_path), backend="ray",
                           pool={"workers": 2}, ray={"shards": 4}))
    with sqlite3.connect(tmp_path / "records.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM attempts").fetchone()[0] == 0


@pytest.mark.parametrize("search", [False, True])
def test_a_policy_that_does_not_load_stops_the_run_before_any_claim(tmp_path, local_ray,
                                                                    search):
    """The policy's failure, not the shard's: no episode is burnt as an infrastructure
    error, every one is left for a run whose policy loads; where a shard's search actor
    found it (search enabled), the error says so alone, without Ray's trace of the actor."""
    with pytest.raises(PolicyLoadFailed) as caught:
        workbench.run(dict(COMMON, policy="hostile_policies:Misbehaves", backend="ray",
                           policy_options={"hows": ["memory"], "where": "load"},
                           output_dir=str(tmp_path), pool={"workers": 1},
                           ray={"shards": 1}, search={"enabled": search}))
    assert str(caught.value).startswith("policy 'misbehaves' did not load: MemoryError: "
                                        "the policy's own allocation at "), str(caught.value)
    assert "\n" not in str(caught.value), str(caught.value)
    with sqlite3.connect(tmp_path / "records.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM attempts").fetchone()[0] == 0


def test_a_warm_ray_pool_serves_several_runs_without_restarting_its_actors(tmp_path, local_ray):
    base = dict(COMMON, policy="wb_plugin.policies:ResidualExpert", policy_options={},
                max_steps=16, backend="ray", warm_up=True,
                pool={"workers": 2, "max_wait_ms": 20}, ray={"shards": 1, "cpus_per_shard": 1})
    with workbench.open_ray_pool(dict(base, output_dir=str(tmp_path / "pool"))) as pool:
        before = {n: ray.get_actor(n)._actor_id for n in ray.util.list_named_actors()
                  if "pool-" in n}
        both = workbench.run(dict(base, output_dir=str(tmp_path / "a")), pool=pool)
        one = workbench.run(dict(base, output_dir=str(tmp_path / "b"), pool={"workers": 1}),
                            pool=pool)
        after = {n: ray.get_actor(n)._actor_id for n in ray.util.list_named_actors()
                 if "pool-" in n}
        with pytest.raises(ValueError, match=r"ray.shards is 2, the pool's 'at most 1'"):
            workbench.run(dict(base, output_dir=str(tmp_path / "c"), ray={"shards": 2}),
                          pool=pool)
    assert len(before) == 2 and after == before  # the same two worker actors served both
    assert set(both.results["worker"]) == {"ray-shard-0/worker-0", "ray-shard-0/worker-1"}
    assert set(one.results["worker"]) == {"ray-shard-0/worker-0"}
    assert outcomes(one.results) == outcomes(both.results)
    assert max(both.report.batch_sizes()) == 2 and max(one.report.batch_sizes()) == 1
    assert not [n for n in ray.util.list_named_actors() if "pool-" in n]  # closed with the pool


def test_each_shard_searches_on_its_own_share_then_runs_its_choice(tmp_path, local_ray):
    common = dict(COMMON, policy="expert", max_steps=24)
    reference = workbench.run(dict(common, output_dir=str(tmp_path / "seq"))).results
    result = workbench.run(dict(
        common, output_dir=str(tmp_path / "ray"), backend="ray", ray={"shards": 2},
        search={"enabled": True, "probe_episodes": 1, "max_workers": 2, "max_replicas": 1}))
    assert [s.shard for s in result.searches] == [0, 1]
    for search in result.searches:
        # the rules read the shard's share (2 CPUs over 2 shards), not the cluster's 2
        assert search.worker_cap == min(64, math.floor(1 / search.cost_per_worker))
        assert (search.probes["status"] == "ok").any() and search.decisions
        chosen = search.best.workers
        used = result.results[result.results["worker"].str.startswith(
            f"ray-shard-{search.shard}/")]["worker"]
        assert not used.empty and {int(w.rsplit("-", 1)[1]) for w in used} <= set(range(chosen))
    assert outcomes(result.results) == outcomes(reference)
    with sqlite3.connect(tmp_path / "ray" / "records.sqlite") as conn:
        kept = [json.loads(t) for (t,) in conn.execute("SELECT search FROM searches")]
    assert sorted(k["shard"] for k in kept) == [0, 1]
