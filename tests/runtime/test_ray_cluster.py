"""Ray across hosts, for real: a head node and a worker node in two network namespaces of
this machine (a veth pair between them, made and removed here), one evaluation spread over
both with the outcomes of a local run, and the worker node killed mid-run: its episodes in
flight become infrastructure errors, its episodes not yet started run on the live
shard, nothing runs twice. Skipped, with the reason, where namespaces cannot be made."""

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray", reason="ray is installed with the test extra")

import workbench  # noqa: E402
from run_outcomes import claimed, finished, outcomes, wait_for  # noqa: E402

NAMESPACES = ("wb-ray-head", "wb-ray-node")
ADDRESSES = ("10.231.7.1", "10.231.7.2")  # the namespaces' own addresses, nowhere else
PORT = 6391
RAY = str(Path(sys.executable).with_name("ray"))
PLUGINS = str(Path(__file__).resolve().parents[1] / "plugins")


def sh(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=check)


def in_namespace(index: int, *command: str) -> list[str]:
    return ["ip", "netns", "exec", NAMESPACES[index], *command]


def kill_namespace(index: int) -> int:
    """SIGKILL every process of a namespace (a host losing power); how many there were."""
    pids = sh("ip", "netns", "pids", NAMESPACES[index], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def remove_namespaces() -> None:
    for index, name in enumerate(NAMESPACES):
        kill_namespace(index)
        sh("ip", "netns", "del", name, check=False)


def make_namespaces() -> str | None:
    """The two namespaces joined by a veth pair, or why they cannot be made here."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    remove_namespaces()  # what a killed earlier session left
    steps = [("ip", "netns", "add", NAMESPACES[0]), ("ip", "netns", "add", NAMESPACES[1]),
             ("ip", "link", "add", "wbray0", "type", "veth", "peer", "name", "wbray1")]
    for index in (0, 1):
        steps += [("ip", "link", "set", f"wbray{index}", "netns", NAMESPACES[index]),
                  tuple(in_namespace(index, "ip", "addr", "add", f"{ADDRESSES[index]}/24",
                                     "dev", f"wbray{index}")),
                  tuple(in_namespace(index, "ip", "link", "set", f"wbray{index}", "up")),
                  tuple(in_namespace(index, "ip", "link", "set", "lo", "up"))]
    for step in steps:
        done = sh(*step, check=False)
        if done.returncode:
            remove_namespaces()
            return f"`{' '.join(step)}` failed: {done.stderr.strip()[:200]}"
    return None


@pytest.fixture(scope="module")
def cluster():
    why = make_namespaces()
    if why:
        pytest.skip(f"network namespaces cannot be made here: {why}")
    # a temp dir of its own (short: Ray's sockets live there), so no bare ray.init() on
    # this machine joins this cluster by accident; a token of its own for both nodes
    temp = tempfile.mkdtemp(prefix="wbr", dir="/tmp")
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.urandom(16).hex(),
           "PYTHONPATH": os.pathsep.join(filter(None, [PLUGINS, os.environ.get("PYTHONPATH")]))}
    head = [RAY, "start", "--head", "--node-ip-address", ADDRESSES[0], "--port", str(PORT),
            "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats",
            "--temp-dir", temp]
    node = [RAY, "start", "--address", f"{ADDRESSES[0]}:{PORT}", "--node-ip-address",
            ADDRESSES[1], "--num-cpus", "2", "--disable-usage-stats"]
    try:
        for index, command in ((0, head), (1, node)):
            done = subprocess.run(in_namespace(index, *command), env=env, capture_output=True,
                                  text=True, timeout=180)
            assert done.returncode == 0, done.stderr[-2000:]
        yield env
    finally:
        remove_namespaces()
        shutil.rmtree(temp, ignore_errors=True)


def driver(env: dict, config: Path) -> list[str]:
    """``workbench eval`` in the head's namespace, joining the cluster."""
    return in_namespace(0, sys.executable, "-m", "workbench.cli", "eval", str(config),
                        "--backend", "ray", "--address", f"{ADDRESSES[0]}:{PORT}")


def write(tmp_path: Path, **config) -> Path:
    path = tmp_path / "ray.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


# two shards of 2 CPUs each: one fits on a node of 2 CPUs, so they run on both nodes
SPREAD = {"shards": 2, "cpus_per_shard": 2}


def test_one_evaluation_spread_over_two_hosts_gives_the_local_outcomes(tmp_path, cluster):
    run = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"], episodes=3,
               policy="expert", image_size=32, max_steps=120, progress=False,
               pool={"workers": 2, "replicas": 1}, ray=SPREAD)
    config = write(tmp_path, **run, output_dir=str(tmp_path / "cluster"))
    done = subprocess.run(driver(cluster, config), env=cluster, capture_output=True,
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
               image_size=32, max_steps=150, progress=False,  # 3 s per episode
               pool={"workers": 2, "replicas": 1}, ray=SPREAD,
               output_dir=str(tmp_path / "run"))
    db = str(tmp_path / "run" / "records.sqlite")
    process = subprocess.Popen(driver(cluster, write(tmp_path, **run)), env=cluster,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # both nodes busy (each shard's two workers have an episode; Ray placed the
        # shards, so which one lives on the worker node is found below) and some finished
        wait_for(lambda: claimed(db, "ray-shard-0/%") == 2 and claimed(db, "ray-shard-1/%")
                 == 2 and len(finished(db)) >= 2, timeout_s=300)
        assert kill_namespace(1) >= 3  # its raylet, object store and actors: really gone
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
    assert rest["error_kind"].isna().all() and (rest["steps"] == 150).all()
    # the dead shard's episodes not started when its host died ran on the live shard
    assert (rest["worker"].str.startswith(alive)).sum() > 6
    with sqlite3.connect(db) as conn:
        claims = conn.execute("SELECT episode_id, count(*) FROM attempts GROUP BY episode_id"
                              ).fetchall()
    assert len(claims) == 12 and all(n == 1 for _, n in claims)  # nothing ran twice
