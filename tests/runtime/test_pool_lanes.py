"""Workers of several environments (``pool.envs_per_worker``), through the runner: the same
outcomes as one process, their lanes' calls served as real batches, one poisoned episode
failing alone, a killed worker failing every episode it held and nothing else, and the
episodes' start order: unseen tasks taking turns, then learnt from this run's own lengths."""

import sqlite3

import pytest

import workbench
from run_outcomes import outcomes, run_killing_worker_0
from workbench.config import PoolConfig
from workbench.errors import ConfigError

TASKS = ["reach-v3", "push-v3", "drawer-open-v3", "button-press-topdown-v3"]
COMMON = dict(benchmark="metaworld", suite="MT10", tasks=TASKS, episodes=2, image_size=48,
              progress=False, policy="wb_plugin.policies:ResidualExpert")


def lanes(workers, envs, replicas=1, batch=None):
    return PoolConfig(workers, replicas, max_batch=batch, max_wait_ms=20.0,
                      envs_per_worker=envs)


def test_lanes_give_one_process_outcomes_and_serve_each_workers_calls_as_one_batch(tmp_path):
    base = dict(COMMON, output_dir=str(tmp_path))
    reference = outcomes(workbench.run(dict(base, run_id="sequential")).results)
    sizes = {}
    with workbench.open_pool(dict(base, backend="pool"), max_workers=2, max_replicas=2) as pool:
        for workers, envs, replicas in [(1, 4, 1), (2, 4, 2), (2, 3, 1)]:
            result = workbench.run(dict(base, backend="pool", run_id=f"l{workers}{envs}{replicas}",
                                        pool=lanes(workers, envs, replicas)), pool=pool)
            assert result.report.complete and not result.report.failures
            assert outcomes(result.results) == reference, (workers, envs, replicas)
            sizes[(workers, envs, replicas)] = result.report.batch_sizes()
    print(f"batch sizes: {sizes}")
    # a worker's 4 lanes asked together: batches of 4 formed, never more than its lanes
    assert sizes[(1, 4, 1)][4] > 0 and max(sizes[(1, 4, 1)]) == 4
    assert sizes[(2, 4, 2)][4] > 0 and max(sizes[(2, 4, 2)]) == 4
    assert max(sizes[(2, 3, 1)]) == 3  # two workers' messages are never merged


def test_a_poisoned_episode_fails_alone_inside_a_lanes_batch(tmp_path):
    victim = "metaworld/MT10/push-v3/0001"
    result = workbench.run(dict(COMMON, output_dir=str(tmp_path), backend="pool",
                                policy_options={"poison": [victim, 10]}, pool=lanes(1, 4)))
    df = result.results.set_index("episode_id")
    assert df.loc[victim, "error_kind"] == "policy" and df.loc[victim, "steps"] == 10
    assert "poisoned observation" in df.loc[victim, "error_message"]
    assert df.drop(index=victim)["error_kind"].isna().all()
    assert max(result.report.batch_sizes()) > 1


def test_a_killed_lanes_worker_fails_every_episode_it_held_and_nothing_runs_twice(tmp_path):
    config = dict(COMMON, policy="zero", output_dir=str(tmp_path), backend="pool",
                  pool=lanes(2, 2), tasks=TASKS[:3])  # zero policy: 500 steps each
    db = str(tmp_path / "records.sqlite")
    result = run_killing_worker_0(config, 3)  # its two episodes and one queued
    df = result.results
    infra = df[df["error_kind"] == "infrastructure"]
    assert len(infra) == 3 and set(infra["worker"]) == {"worker-0"}
    assert infra["error_message"].str.contains(
        "worker 0 died \\(exit code -9\\) during the episode or with it queued there").all()
    done = df[df["error_kind"].isna()]
    assert len(done) == len(df) - 3 and (done["steps"] == 500).all()
    assert set(done["worker"]) == {"worker-1"} and set(df["status"]) == {"finished"}
    with sqlite3.connect(db) as conn:
        attempts = conn.execute("SELECT episode_id, count(*) FROM attempts "
                                "GROUP BY episode_id").fetchall()
    assert len(attempts) == len(df) and {n for _, n in attempts} == {1}


def test_episodes_start_longest_first_as_this_runs_lengths_are_learnt(tmp_path):
    """One worker, one environment, the plan's order push, push, push, reach, reach,
    reach: after push's first episode, unknown reach goes first; once reach is known
    shorter (the scripted expert's shortest task here), the rest of push goes before it."""
    result = workbench.run(dict(COMMON, tasks=["reach-v3", "push-v3"], episodes=3,
                                policy="expert", output_dir=str(tmp_path), backend="pool",
                                pool=PoolConfig(1, 1)))
    df = result.results.sort_values("claimed_at")
    steps = df.groupby("task")["steps"].mean()
    assert steps["push-v3"] > steps["reach-v3"], steps
    assert df["episode_id"].str.rsplit("/", n=2).str[-2:].str.join("/").tolist() == [
        "push-v3/0000", "reach-v3/0000", "push-v3/0001", "push-v3/0002",
        "reach-v3/0001", "reach-v3/0002"]


def test_tasks_not_yet_seen_take_turns_at_the_start(tmp_path):
    """The plan lists each task's episodes together; with nothing known about any task,
    the first three claims (a worker of two lanes and one queued) are one episode of
    each task, not the first task's two and the second's one."""
    result = workbench.run(dict(COMMON, tasks=["reach-v3", "push-v3", "button-press-topdown-v3"],
                                episodes=2, policy="expert", output_dir=str(tmp_path),
                                backend="pool", pool=lanes(1, 2)))
    df = result.results.sort_values("claimed_at")
    assert len(df) == 6 and df["error_kind"].isna().all()
    assert df["task"].head(3).tolist() == ["button-press-topdown-v3", "push-v3", "reach-v3"]


@pytest.mark.parametrize("change, message", [
    (dict(pool={"envs_per_worker": 0}), "pool.envs_per_worker: expected an integer >= 1"),
    (dict(pool={"envs_per_worker": "8"}), "pool.envs_per_worker: expected an integer"),
    (dict(pool={"envs_per_worker": 10**6}), "<= 64; got 1000000"),
    (dict(backend="sequential", pool={"envs_per_worker": 2}),
     "is the pool backend's; backend sequential steps one"),
    (dict(backend="pool", search=True, pool={"envs_per_worker": 2}),
     "turn the search off to set 2"),
])
def test_envs_per_worker_that_cannot_be_run_is_refused_by_name(change, message):
    with pytest.raises(ConfigError, match=message.replace("(", "\\(").replace(")", "\\)")):
        workbench.load_config(dict(COMMON, **change))
