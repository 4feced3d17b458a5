"""Claims belong to the plan: a campaign's cases are attempted once, whatever is set at
run time, whatever run id or entry point is used, and only on the code, data and
weights it froze, checked again before every claim. Through the real command line."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

import workbench
from workbench.campaigns import RUN_TIME_KEYS, create_campaign, open_campaign
from workbench.config import EvalConfig
from tally import note, refused, workbench as cli

BASE = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=2,
            max_steps=4, image_size=32, progress=False, policy="zero")


def make(tmp_path, **changes):
    folder = tmp_path / "campaign"
    create_campaign({**BASE, "output_dir": str(folder), **changes})
    return folder


def attempts(folder) -> list[tuple[str, int]]:
    conn = sqlite3.connect(folder / "records.sqlite")
    rows = conn.execute("SELECT episode_id, attempt FROM attempts ORDER BY episode_id, "
                        "attempt").fetchall()
    conn.close()
    return rows


def test_run_time_keys_are_all_outside_what_decides_outcomes():
    config = EvalConfig(benchmark="metaworld", suite="MT10", policy="zero")
    for key in RUN_TIME_KEYS:  # each changed alone leaves the outcome hash as it is
        value = {"backend": "pool", "pool": {"workers": 3}, "search": {"enabled": True},
                 "ray": {"shards": 2}, "service": {"url": "ws://127.0.0.1:1"},
                 "progress": False, "video": 2, "interactions": False, "warm_up": True,
                 "observe": "every_step"}[key]
        assert config.replace(**{key: value}).key() == config.key(), key


@pytest.mark.parametrize("setting,says", [
    ("output_dir=ELSEWHERE", "'output_dir' cannot be set when a campaign runs"),
    ("run_id=other", "'run_id' cannot be set when a campaign runs"),
    ("max_steps=3", "'max_steps' cannot be set when a campaign runs"),
    ("seed=7", "'seed' cannot be set when a campaign runs"),
    ("device=cuda:0", "'device' cannot be set when a campaign runs"),
    ("policy_options={delay_s: 1}", "'policy_options' cannot be set when a campaign runs"),
    ("episodes=5", "'episodes' cannot be set when a campaign runs"),
    ("nosuch=1", "'nosuch' is not a config key"),
    ("pool.nosuch=1", "unknown key pool.nosuch"),
    ("pool.workers=-1", "pool.workers: expected an integer >= 1"),
    ("progress=maybe", "progress: expected true or false"),
])
def test_no_run_time_setting_reopens_a_campaign(tmp_path, setting, says):
    folder = make(tmp_path)
    assert cli("campaign", "run", str(folder)).rc == 0
    before = attempts(folder)
    refused(cli("campaign", "run", str(folder), "--set", setting),
            f"campaign run --set {setting}", says)
    assert attempts(folder) == before and len(before) == 2
    assert not (tmp_path / "ELSEWHERE").exists() and not os.path.exists("ELSEWHERE")


def test_how_it_runs_may_change_and_nothing_runs_twice(tmp_path):
    folder = make(tmp_path)
    assert cli("campaign", "run", str(folder)).rc == 0
    again = cli("campaign", "run", str(folder), "--set", "backend=pool", "--set",
                "pool.workers=2", "--set", "progress=true", "--set", "video=1")
    assert again.rc == 0, again.stderr
    assert attempts(folder) == [(f"metaworld/MT10/reach-v3/000{i}", 1) for i in range(2)]
    note("campaign run --set backend/pool/progress/video", "accepted as documented")


def test_another_run_id_or_entry_point_in_a_campaign_folder_is_refused(tmp_path):
    folder = make(tmp_path)
    config = {**BASE, "output_dir": str(folder)}
    for run_id in ("other", open_campaign(folder).campaign_id):
        with pytest.raises(ValueError, match="holds campaign .*claimed only by `workbench "
                                             "campaign run"):
            workbench.run({**config, "run_id": run_id})
    path = tmp_path / "same.yaml"
    path.write_text(yaml.safe_dump({**config, "run_id": "other"}))
    refused(cli("eval", str(path)), "eval in a campaign folder", "holds campaign")
    assert attempts(folder) == []


def _interrupt_second_case(tmp_path):
    """A 3-case campaign whose driver was SIGKILLed while case 1 ran (case 0 finished)."""
    folder = make(tmp_path, policy="service_policies:SlowZero",
                  policy_options={"delay_s": 0.05}, episodes=3, max_steps=40)
    driver = subprocess.Popen([sys.executable, "-m", "workbench.cli", "campaign", "run",
                               str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            conn = sqlite3.connect(folder / "records.sqlite")
            states = dict(conn.execute("SELECT episode_id, status FROM episodes").fetchall())
            conn.close()
            if list(states.values()).count("finished") == 1 and "claimed" in states.values():
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the driver never reached its second case")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    assert driver.returncode == -signal.SIGKILL
    return folder


def test_a_retry_request_is_checked_whole_before_any_of_it_is_kept(tmp_path):
    folder = _interrupt_second_case(tmp_path)
    case = "metaworld/MT10/reach-v3/{:04d}".format
    refused(cli("campaign", "run", str(folder), "--retry", case(1), "--retry", case(1)),
            "--retry C --retry C", f"--retry '{case(1)}' is given twice")
    refused(cli("campaign", "run", str(folder), "--retry", case(1), "--retry", "nope"),
            "--retry C --retry unknown", "--retry 'nope' is not a case")
    refused(cli("campaign", "run", str(folder), "--retry", case(1), "--retry", case(0)),
            "--retry interrupted --retry failed",
            f"case '{case(0)}' is failed; only an interrupted or infrastructure-errored case "
            "may be retried; nothing was retried")
    conn = sqlite3.connect(folder / "records.sqlite")
    assert conn.execute("SELECT count(*) FROM retries").fetchone()[0] == 0
    conn.close()
    plain = cli("campaign", "run", str(folder))  # case 2 runs; case 1 stays interrupted
    assert plain.rc == 0, plain.stderr
    assert attempts(folder) == [(case(0), 1), (case(1), 1), (case(2), 1)]
    status = json.loads(cli("campaign", "status", str(folder), "--json").stdout)[-1]
    assert status["interrupted"] == 1 and status["unattempted"] == 0
    once = cli("campaign", "run", str(folder), "--retry", case(1), "--reason", "killed")
    assert once.rc == 0, once.stderr
    assert attempts(folder) == [(case(0), 1), (case(1), 1), (case(1), 2), (case(2), 1)]


HELPER = "ACTION = {value}\n"
POLICY = '''
import numpy as np
from workbench.policies.zero import ZeroPolicy
import {helper} as helper


class HelperPolicy(ZeroPolicy):
    """Acts helper.ACTION; after ``edit_after`` calls (when set) rewrites its helper."""

    name = "helper-policy"

    def __init__(self, protocol="metaworld-v1", weights=None, edit_after=None):
        super().__init__(protocol)
        self.weights, self.edit_after, self.calls = weights, edit_after, 0

    def _act(self, observation, episode_state):
        self.calls += 1
        if self.edit_after is not None and self.calls == self.edit_after:
            with open(helper.__file__, "a") as f:
                f.write("# edited by the policy while it runs\\n")
        return np.full(self._dim, helper.ACTION, np.float32)
'''


def user_package(tmp_path, name):
    code = tmp_path / f"code_{name}"
    code.mkdir()
    (code / f"{name}_values.py").write_text(HELPER.format(value=0.0))
    (code / f"{name}_policy.py").write_text(POLICY.format(helper=f"{name}_values"))
    weights = code / "weights.bin"
    weights.write_bytes(os.urandom(4096))
    return code, weights


@pytest.mark.parametrize("edit", ["helper", "weights"])
def test_a_changed_local_module_or_weight_file_is_refused_before_the_run(tmp_path, edit):
    code, weights = user_package(tmp_path, f"frozen_{edit}")
    env = {"PYTHONPATH": os.pathsep.join([str(code), os.environ["PYTHONPATH"]])}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**BASE, "output_dir": str(tmp_path / "campaign"),
                                      "policy": f"frozen_{edit}_policy:HelperPolicy",
                                      "policy_options": {"weights": str(weights)}}))
    created = cli("campaign", "create", str(config), env=env)
    assert created.rc == 0, created.stderr
    manifest = json.loads((tmp_path / "campaign" / "campaign.json").read_text())
    helper = code / f"frozen_{edit}_values.py"
    assert str(helper) in manifest["sources"]["policy"]  # imported by the policy's module
    assert str(weights) in manifest["sources"]["options"]
    assert "workbench/data/vision_bc.pt" in manifest["sources"]["workbench"]  # not only .py
    if edit == "helper":
        helper.write_text(HELPER.format(value=1.0))
        says = f"{helper} (policy source modified)"
    else:
        weights.write_bytes(os.urandom(4096))
        says = f"{weights} (file named in policy_options modified)"
    refused(cli("campaign", "run", str(tmp_path / "campaign"), env=env),
            f"campaign run after its {edit} changed", says)
    assert attempts(tmp_path / "campaign") == []


def test_a_change_while_it_runs_stops_it_before_the_next_claim(tmp_path):
    code, weights = user_package(tmp_path, "midrun")
    env = {"PYTHONPATH": os.pathsep.join([str(code), os.environ["PYTHONPATH"]])}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**BASE, "episodes": 4,
                                      "output_dir": str(tmp_path / "campaign"),
                                      "policy": "midrun_policy:HelperPolicy",
                                      "policy_options": {"edit_after": 2}}))
    assert cli("campaign", "create", str(config), env=env).rc == 0
    refused(cli("campaign", "run", str(tmp_path / "campaign"), env=env),
            "a helper edited during the run", "the run stopped before its next claim", code=1)
    assert attempts(tmp_path / "campaign") == [("metaworld/MT10/reach-v3/0000", 1)]
