"""The service backend: a policy run here against a SIM service (a real WebSocket server
on loopback) keeps the records of a local run, sees only public features, and names
the harness when the service dies."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

import workbench
from workbench.contracts.rendering import use_headless_rendering
from workbench.service.sim_server import build_service

BASE = {"benchmark": "metaworld", "suite": "MT1:reach-v3", "image_size": 32,
        "progress": False, "max_steps": 30, "episodes": 2}
OUTCOME = ["episode_id", "success", "terminal_step", "steps", "policy_calls", "decisions",
           "rejections", "termination", "error_kind"]


@pytest.fixture
def service(tmp_path, monkeypatch):
    use_headless_rendering()
    svc = build_service("metaworld", "MT1:reach-v3", episodes=2, image_size=32, max_steps=30,
                        video=True, artifacts_dir=str(tmp_path / "server-videos")).start()
    monkeypatch.setenv("WORKBENCH_SIM_TOKEN", svc.token)
    yield svc
    svc.close()


def wait_for(predicate, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def log_lines(path):
    return [json.loads(line) for line in open(path)]


@pytest.mark.parametrize("invalid_first", [False, True], ids=["valid", "refused-first"])
def test_local_and_remote_runs_agree_and_the_policy_sees_only_public_features(
        service, tmp_path, invalid_first):
    extra = {"invalid_actions": "feedback"} if invalid_first else {}
    local_log, remote_log = tmp_path / "local.jsonl", tmp_path / "remote.jsonl"
    policy = "service_policies:WireRecorder"
    local = workbench.run({**BASE, **extra, "policy": policy, "observe": "chunk_boundary",
                           "policy_options": {"log_path": str(local_log),
                                              "invalid_first": invalid_first},
                           "output_dir": str(tmp_path / "local")})
    remote = workbench.run({**BASE, **extra, "policy": policy, "backend": "service",
                            "service": {"url": service.url}, "video": 1,
                            "policy_options": {"log_path": str(remote_log),
                                               "invalid_first": invalid_first},
                            "output_dir": str(tmp_path / "remote")})
    assert local.results[OUTCOME].equals(remote.results[OUTCOME])
    assert local.results["steps"].tolist() == [30, 30]
    # the same observations, call by call (hashes of every array)
    assert log_lines(local_log) == log_lines(remote_log)
    declared = {"images.primary", "state", "instruction", "episode_id", "step"}
    for entry in log_lines(remote_log):
        assert set(entry["keys"]) - {"feedback"} == declared
        assert entry["arrays"]["state"][:2] == ["float32", [4]]
        assert entry["arrays"]["images.primary"][:2] == ["uint8", [32, 32, 3]]
    if invalid_first:
        assert remote.results["rejections"].tolist() == [1, 1]
        second = [e for e in log_lines(remote_log) if e["feedback"]][0]
        assert second["step"] == 0 and "component 0 = 2 outside [-1, 1]" in second["feedback"]
        history = json.load(open(remote.results["interactions_path"][0]))
        assert history["calls"][0]["rejection"] is not None
        assert history["calls"][0]["controls"] == [] and history["counters"]["rejections"] == 1
    # the service kept the first episode's video; the driver fetched it hash-checked
    video = remote.results["video_path"][0]
    assert video and os.path.getsize(video) > 0
    assert service.cases[remote.results["episode_id"][0]].state == "done"


def test_a_success_ends_the_episode_where_a_local_run_ends_it_though_never_said_in_public(
        tmp_path, monkeypatch):
    """Even episodes succeed at step 7: the driver learns it from the admin's score (the
    public acks never say it) and ends the episode there, as the local step loop does."""
    adapter, options = "wb_plugin.benchmarks:EarlySuccessMetaWorld", {"succeed_at": 7}
    config = {**BASE, "episodes": 4, "benchmark": adapter, "benchmark_options": options,
              "policy": "zero"}
    local = workbench.run({**config, "output_dir": str(tmp_path / "local")})
    with build_service(adapter, "MT1:reach-v3", episodes=4, image_size=32, max_steps=30,
                       benchmark_options=options) as svc:
        monkeypatch.setenv("WORKBENCH_SIM_TOKEN", svc.token)
        remote = workbench.run({**config, "backend": "service", "service": {"url": svc.url},
                                "output_dir": str(tmp_path / "remote")})
        served = {c: (s.state, s.termination, s.steps) for c, s in svc.cases.items()}
    assert local.results[OUTCOME].equals(remote.results[OUTCOME])
    assert remote.results["success"].tolist() == [True, False, True, False]
    assert remote.results["steps"].tolist() == [7, 30, 7, 30]
    assert list(served.values()) == [("done", "success", 7), ("done", "step_limit", 30)] * 2


def test_a_privileged_policy_is_refused_before_anything_is_claimed(service, tmp_path):
    with pytest.raises(ValueError, match="never serves"):
        workbench.run({**BASE, "policy": "expert", "backend": "service",
                       "service": {"url": service.url}, "output_dir": str(tmp_path)})
    assert workbench.load_results(tmp_path / "records.sqlite")["status"].eq("planned").all()
    assert all(c.state == "unattempted" for c in service.cases.values())


def test_a_wrong_token_or_a_missing_service_claims_nothing(service, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_SIM_TOKEN", "not-the-token")
    with pytest.raises(Exception, match="SIM service at ws://.*(unauthorized|refused)"):
        workbench.run({**BASE, "policy": "zero", "backend": "service",
                       "service": {"url": service.url}, "output_dir": str(tmp_path / "a")})
    with pytest.raises(Exception, match="unreachable"):
        workbench.run({**BASE, "policy": "zero", "backend": "service",
                       "service": {"url": "ws://127.0.0.1:9"}, "output_dir": str(tmp_path / "b")})
    for folder in ("a", "b"):
        results = workbench.load_results(tmp_path / folder / "records.sqlite")
        assert results["status"].eq("planned").all()


def test_service_killed_mid_episode_is_an_infrastructure_error_not_retried(tmp_path, monkeypatch):
    server = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "serve", "--benchmark", "metaworld", "--suite",
         "MT1:reach-v3", "--episodes", "3", "--image-size", "32", "--max-steps", "30",
         "--port", "0", "--token-file", str(tmp_path / "token"),
         "--state-dir", str(tmp_path / "state")],
        stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"at (ws://\S+);", server.stdout.readline()).group(1)
        monkeypatch.setenv("WORKBENCH_SIM_TOKEN", (tmp_path / "token").read_text())
        monkeypatch.setenv("WB_KILL_PID", str(server.pid))
        run = workbench.run({**BASE, "episodes": 3, "policy": "service_policies:KillsAtStep",
                             "backend": "service", "service": {"url": url},
                             "output_dir": str(tmp_path / "out")})
        assert server.wait(10) == -9  # really killed
    finally:
        server.kill()
    rows = run.results.set_index("episode_id")
    first = "metaworld/MT1:reach-v3/reach-v3/0000"
    assert rows.loc[first, "error_kind"] == "infrastructure"
    assert "SIM service" in rows.loc[first, "error_message"]
    assert 5 <= rows.loc[first, "steps"] < 30
    assert rows["status"].tolist() == ["finished", "planned", "planned"]  # the rest untouched
    assert not run.report.complete and "unreachable" in run.report.failures[0]
    monkeypatch.setenv("WB_KILL_PID", "")
    with build_service("metaworld", "MT1:reach-v3", episodes=3, image_size=32,
                       max_steps=30) as fresh:
        monkeypatch.setenv("WORKBENCH_SIM_TOKEN", fresh.token)
        again = workbench.run({**BASE, "episodes": 3, "policy": "service_policies:KillsAtStep",
                               "backend": "service", "service": {"url": fresh.url},
                               "output_dir": str(tmp_path / "out")})
        assert fresh.cases[first].state == "unattempted"  # never sent again
    assert [r["episode_id"][-4:] for r in again.report.rows] == ["0001", "0002"]
    assert again.results.set_index("episode_id").loc[first, "error_kind"] == "infrastructure"


def test_campaign_through_the_service_killed_resumed_and_retried(service, tmp_path):
    from workbench.campaigns import create_campaign

    folder = tmp_path / "campaign"
    campaign = create_campaign({**BASE, "policy": "service_policies:SlowZero",
                                "policy_options": {"delay_s": 0.1}, "backend": "service",
                                "service": {"url": service.url}, "output_dir": str(folder)})
    driver = subprocess.Popen([sys.executable, "-m", "workbench.cli", "campaign", "run",
                               str(folder)], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: campaign.status().set_index("task").loc["ALL", ["done", "in_flight"]
                                                               ].tolist() == [1, 1])
        driver.kill()
        driver.wait(30)
    finally:
        driver.kill()
    assert driver.returncode == -9
    status = campaign.status().set_index("task").loc["ALL"]
    assert (status["done"], status["interrupted"], status["unattempted"]) == (2, 1, 0)
    interrupted = campaign.results().query("status == 'claimed'")["episode_id"].item()
    wait_for(lambda: service.cases[interrupted].state == "abandoned")  # it saw the drop
    assert campaign.run().report.rows == []  # nothing left that may run
    retried = campaign.run(retry=[interrupted], reason="driver killed by a test")
    assert [r["episode_id"] for r in retried.report.rows] == [interrupted]
    assert retried.report.rows[0]["error_kind"] is None
    assert service.cases[interrupted].attempts == 2 and service.cases[interrupted].state == "done"
    assert campaign.attempts().groupby("episode_id")["outcome"].apply(list).to_dict()[
        interrupted] == ["interrupted", "failed"]
