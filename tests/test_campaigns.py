"""Campaigns: frozen plans, permanent claims, interrupted attempts, explicit retries,
code checks and preflight, with real processes killed by SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from workbench.campaigns import CodeChanged, create_campaign, open_campaign

BASE = {"benchmark": "metaworld", "suite": "MT1:reach-v3", "image_size": 32,
        "progress": False}


def config(folder, **changes):
    return {**BASE, "output_dir": str(folder), **changes}


def cli(*args, check=True, env=None):
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True,
                          text=True, check=check, env=env, timeout=300)


def wait_for(predicate, timeout_s=120, what="condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def counts(campaign):
    return campaign.status().set_index("task").loc["ALL"].to_dict()


def test_a_campaign_runs_each_case_once_whatever_the_run(tmp_path):
    campaign = create_campaign(config(tmp_path, policy="zero", episodes=3, max_steps=15))
    manifest = json.loads((tmp_path / "campaign.json").read_text())
    assert manifest["cases"] == [f"metaworld/MT1:reach-v3/reach-v3/000{i}" for i in range(3)]
    assert manifest["budgets"]["max_steps"] == 15
    assert manifest["policy"]["source_file"].endswith("workbench/policies/zero.py")
    assert len(manifest["hashes"]["workbench"]) == 64
    first = campaign.run()
    assert len(first.report.rows) == 3
    again = open_campaign(tmp_path).run(progress=True)  # how it runs may change
    assert again.report.rows == []
    assert campaign.attempts().groupby("episode_id").size().tolist() == [1, 1, 1]
    assert counts(campaign) == {"cases": 3, "done": 3, "succeeded": 0, "failed": 3,
                                "errored": 0, "interrupted": 0, "in_flight": 0,
                                "unattempted": 0}
    with pytest.raises(ValueError, match="'max_steps' cannot be set when a campaign runs"):
        campaign.run(max_steps=20)
    with pytest.raises(ValueError, match="already holds records"):
        create_campaign(config(tmp_path, policy="zero", episodes=3, max_steps=15), "other")


def test_driver_killed_then_resumed_and_one_case_retried_on_request(tmp_path):
    folder = tmp_path / "c"
    campaign = create_campaign(config(folder, policy="service_policies:SlowZero",
                                      policy_options={"delay_s": 0.05}, episodes=4,
                                      max_steps=40))
    driver = subprocess.Popen([sys.executable, "-m", "workbench.cli", "campaign", "run",
                               str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: counts(campaign)["done"] >= 1 and counts(campaign)["in_flight"] == 1,
                 what="one case done and one in flight")
        before = counts(campaign)
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    finally:
        driver.kill()
    assert driver.returncode == -signal.SIGKILL
    after_kill = counts(campaign)
    assert after_kill["in_flight"] == 0 and after_kill["interrupted"] == 1
    assert after_kill["done"] == before["done"] + 1
    done_before = set(campaign.results().query("status == 'finished'")["episode_id"])

    resumed = cli("campaign", "run", str(folder))
    assert "interrupted" in resumed.stdout
    final = counts(campaign)
    assert final["unattempted"] == 0 and final["in_flight"] == 0
    assert final["interrupted"] == 1 and final["done"] == 4
    results = campaign.results().set_index("episode_id")
    killed = results.index[results["interrupted"] == 1].tolist()
    assert len(killed) == 1 and results.loc[killed[0], "error_kind"] == "infrastructure"
    assert done_before <= set(results.index[results["status"] == "finished"])
    attempts = campaign.attempts()
    assert attempts.groupby("episode_id").size().tolist() == [1, 1, 1, 1]
    assert attempts.set_index("episode_id").loc[killed[0], "outcome"] == "interrupted"

    refused = cli("campaign", "run", str(folder), "--retry",
                  next(e for e in results.index if e != killed[0]), check=False)
    assert refused.returncode == 2 and "only an interrupted" in refused.stderr
    cli("campaign", "run", str(folder), "--retry", killed[0], "--reason", "killed by a test")
    attempts = campaign.attempts()
    assert attempts.groupby("episode_id").size().to_dict()[killed[0]] == 2
    assert attempts.query("episode_id == @killed[0]")["outcome"].tolist() == \
        ["interrupted", "failed"]
    store_retries = open_campaign(folder)
    from workbench.records.store import RecordStore
    store = RecordStore(store_retries.records_path)
    retries = store.retries()
    store.close()
    assert retries[["episode_id", "previous_outcome", "reason"]].values.tolist() == \
        [[killed[0], "interrupted", "killed by a test"]]
    assert counts(campaign)["interrupted"] == 0


def test_changed_policy_source_is_refused_naming_the_file(tmp_path, monkeypatch):
    module = tmp_path / "mod" / "my_frozen_policy.py"
    module.parent.mkdir()
    module.write_text("from workbench.policies.zero import ZeroPolicy\n\n"
                      "class Frozen(ZeroPolicy):\n    name = 'frozen'\n")
    monkeypatch.syspath_prepend(str(module.parent))
    campaign = create_campaign(config(tmp_path / "c", policy="my_frozen_policy:Frozen",
                                      max_steps=5))
    module.write_text(module.read_text() + "# changed\n")
    with pytest.raises(CodeChanged, match=r"my_frozen_policy\.py \(policy source modified\)"):
        campaign.run()
    assert campaign.attempts().empty
    assert counts(campaign)["unattempted"] == 1


def test_changed_workbench_source_is_refused_naming_the_file(tmp_path):
    campaign = create_campaign(config(tmp_path, policy="zero", max_steps=5))
    campaign.manifest["sources"]["workbench"]["workbench/runner.py"] = "0" * 64
    with pytest.raises(CodeChanged, match=r"workbench/runner\.py \(modified\)"):
        campaign.run()
    assert campaign.attempts().empty


def test_a_failing_preflight_claims_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("WB_TEST_CREDENTIAL", raising=False)
    campaign = create_campaign(config(tmp_path, policy="service_policies:NeedsCredential",
                                      episodes=2, max_steps=5))
    proc = cli("campaign", "run", str(tmp_path), check=False)
    assert proc.returncode == 2
    assert "preflight of policy 'needs-credential' failed" in proc.stderr
    assert "WB_TEST_CREDENTIAL is not set" in proc.stderr
    assert campaign.attempts().empty and counts(campaign)["unattempted"] == 2
    monkeypatch.setenv("WB_TEST_CREDENTIAL", "present")
    assert len(campaign.run().report.rows) == 2


def test_two_processes_share_one_campaign_without_claiming_a_case_twice(tmp_path):
    campaign = create_campaign(config(tmp_path, policy="service_policies:SlowZero",
                                      policy_options={"delay_s": 0.04}, episodes=8,
                                      max_steps=40))
    procs = [subprocess.Popen([sys.executable, "-m", "workbench.cli", "campaign", "run",
                               str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    for proc in procs:
        proc.wait(300)
        assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
    attempts = campaign.attempts()
    assert len(attempts) == 8 and attempts["episode_id"].is_unique
    holders = attempts["holder"].str.rsplit(":", n=2).str[0]  # host:pid
    assert holders.nunique() == 2  # both processes ran cases
    assert counts(campaign)["done"] == 8


def test_status_and_report_from_the_command_line(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps(config(tmp_path / "c", policy="zero", episodes=2, max_steps=5)))
    created = cli("campaign", "create", str(cfg), "--id", "my-campaign")
    assert "created campaign my-campaign: 2 cases" in created.stdout
    status = json.loads(cli("campaign", "status", str(tmp_path / "c"), "--json").stdout)
    assert [(r["task"], r["unattempted"]) for r in status] == [("reach-v3", 2), ("ALL", 2)]
    cli("campaign", "run", str(tmp_path / "c"))
    paths = cli("campaign", "report", str(tmp_path / "c")).stdout.split()
    report = json.loads(open(paths[0]).read())
    assert report["campaign"]["campaign_id"] == "my-campaign"
    assert os.path.exists(paths[1])


def test_a_campaign_runs_on_ray_and_its_claims_hold_for_every_backend(tmp_path):
    campaign = create_campaign(config(tmp_path, policy="zero", episodes=4, max_steps=10))
    import ray

    try:
        on_ray = campaign.run(backend="ray", ray={"shards": 2}, pool={"workers": 1})
    finally:
        ray.shutdown()  # the local Ray the run started: not left running for later tests
    assert sorted(r["worker"].split("/")[0] for r in on_ray.report.rows) == \
        ["ray-shard-0", "ray-shard-0", "ray-shard-1", "ray-shard-1"]
    assert campaign.run(backend="pool").report.rows == []
    assert campaign.attempts()["episode_id"].is_unique and len(campaign.attempts()) == 4
