"""Ray across hosts, for real: a head node and a worker node in two network namespaces of
this machine (a veth pair between them, made and removed here), one evaluation spread over
both with the outcomes of a local run, and the worker node killed mid-run: its episodes in
flight become infrastructure errors, its episodes not yet started run on the live
shard, nothing runs twice. Skipped, with the reason, where namespaces cannot be made."""

import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray", reason="ray is installed with the test extra")

import workbench  # noqa: E402
from run_outcomes import claimed, finished, outcomes, wait_for  # noqa: E402
from workbench.studies.ray_hosts import HostsUnavailable, TwoHosts, two_hosts  # noqa: E402

PLUGINS = str(Path(__file__).resolve().parents[1] / "plugins")


@pytest.fixture(scope="module")
def cluster():
    try:
        with two_hosts(cpus=2, python_path=[PLUGINS]) as hosts:
            yield hosts
    except HostsUnavailable as why:
        pytest.skip(str(why))


def driver(cluster: TwoHosts, config: Path) -> list[str]:
    """``workbench eval`` in the head's namespace, joining the cluster."""
    return cluster.eval_command(config)


def write(tmp_path: Path, **config) -> Path:
    path = tmp_path / "ray.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


# two shards of 2 CPUs each: one fits on a node of 2 CPUs, so they run on both nodes
SPREAD = {"shards": 2, "cpus_per_shard": 2}
#: the killed-host run's episode length: zero actions never succeed, so every episode runs
#: all of it; at least 1.2 s of the policy's delay, so both hosts are busy at the kill
STEPS = 60


def test_one_evaluation_spread_over_two_hosts_gives_the_local_outcomes(tmp_path, cluster):
    run = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"], episodes=3,
               policy="expert", image_size=32, max_steps=120, progress=False,
               pool={"workers": 2, "replicas": 1}, ray=SPREAD)
    config = write(tmp_path, **run, output_dir=str(tmp_path / "cluster"))
    done = subprocess.run(driver(cluster, config), env=cluster.env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    spread = workbench.load_results(tmp_path / "cluster" / "records.sqlite")
    local = workbench.run({**run, "backend": "sequential", "output_dir": str(tmp_path / "local")})
    assert len(spread) == 6 and set(spread["status"]) == {"finished"}
    assert outcomes(spread) == outcomes(local.results)
    assert spread["success"].any() and spread["worker"].str[:11].nunique() == 2  # both shards


def test_a_host_killed_mid_run_fails_its_episodes_in_flight_and_the_rest_finish(tmp_path,
                                                                               cluster):
    run = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"], episodes=6,
               policy="helper_policies:SlowZero", policy_options={"delay_s": 0.02},
               image_size=32, max_steps=STEPS, progress=False,
               pool={"workers": 2, "replicas": 1}, ray=SPREAD,
               output_dir=str(tmp_path / "run"))
    db = str(tmp_path / "run" / "records.sqlite")
    process = subprocess.Popen(driver(cluster, write(tmp_path, **run)), env=cluster.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # both nodes busy (each shard's two workers have an episode; Ray placed the
        # shards, so which one lives on the worker node is found below) and some finished
        wait_for(lambda: claimed(db, "ray-shard-0/%") == 2 and claimed(db, "ray-shard-1/%")
                 == 2 and len(finished(db)) >= 2, timeout_s=300)
        assert cluster.kill(1) >= 3  # its raylet, object store and actors: really gone
        _, stderr = process.communicate(timeout=400)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr[-3000:]
    df = workbench.load_results(db).set_index("episode_id")
    assert len(df) == 12 and set(df["status"]) == {"finished"}
    errors = set(df.index[df["error_kind"] == "infrastructure"])
    # one per worker of the dead host: the episode each had when it died (one whose result
    # had left the host before the kill is recorded as finished: it was no longer in
    # flight), then its shard has no live worker and hands its queue over
    assert len(errors) == 2
    (dead,) = set(df.loc[sorted(errors), "worker"].str[:12])  # the worker node's shard
    alive = "ray-shard-1/" if dead == "ray-shard-0/" else "ray-shard-0/"
    assert df.loc[sorted(errors), "error_message"].str.contains("died").all()
    rest = df.drop(index=sorted(errors))
    assert rest["error_kind"].isna().all() and (rest["steps"] == STEPS).all()
    # the dead shard's episodes not started when its host died ran on the live shard
    assert (rest["worker"].str.startswith(alive)).sum() > 6
    with sqlite3.connect(db) as conn:
        claims = conn.execute("SELECT episode_id, count(*) FROM attempts GROUP BY episode_id"
                              ).fetchall()
    assert len(claims) == 12 and all(n == 1 for _, n in claims)  # nothing ran twice
