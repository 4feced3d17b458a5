import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from workbench.benchmarks import ContractError
from workbench.plan import plan_episodes
from workbench.policies import Capabilities, Policy
from workbench.records import RecordStore
from workbench.runtime.sequential import evaluate_sequential


def cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return proc


def write_config(path, **overrides):
    cfg = {"benchmark": "metaworld", "suite": "MT1:pick-place-v3", "policy": "expert",
           "episodes": 3, "output_dir": str(path.parent / path.stem), "progress": False}
    cfg.update(overrides)
    path.write_text(yaml.safe_dump(cfg))
    return path


def episodes_json(db):
    return [json.loads(line) for line in cli("results", db, "--json").stdout.splitlines()]


def test_expert_solves_pick_place_three_of_three_and_is_reproducible(tmp_path):
    outcomes = []
    for name in ("a", "b"):
        proc = cli("eval", write_config(tmp_path / f"{name}.yaml"))
        assert "ALL" in proc.stdout
        rows = episodes_json(tmp_path / name / "records.sqlite")
        assert [r["success"] for r in rows] == [True, True, True]
        assert all(r["error"] is None and r["diagnostic"] for r in rows)
        assert {"task", "episode", "success", "terminal_step", "steps", "error"} <= set(rows[0])
        outcomes.append([(r["episode"], r["success"], r["terminal_step"]) for r in rows])
        report = json.loads((tmp_path / name / "report.json").read_text())
        assert report["diagnostic"] and report["summary"][-1]["successes"] == 3
        assert "Diagnostic run" in (tmp_path / name / "report.html").read_text()
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("override, message", [
    ({"benchmark": "libero9"}, "unknown benchmark 'libero9'; available: \\['metaworld'\\]"),
    ({"suite": "MT7"}, "unknown suite 'MT7' for metaworld; available: \\['MT10'"),
    ({"suite": "MT10", "tasks": ["fly-v3"]}, "unknown tasks \\['fly-v3'\\].*available: \\['reach-v3'"),
    ({"policy": "oracle"}, "unknown policy 'oracle'; available"),
    ({"episodes": 0}, "episodes must be a positive integer"),
    ({"colour": "red"}, "unknown keys \\['colour'\\]; known"),
])
def test_bad_configs_get_clear_errors(tmp_path, override, message):
    proc = cli("eval", write_config(tmp_path / "c.yaml", **override), check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    import re
    assert re.search(message, proc.stderr), proc.stderr


def test_missing_files_get_clear_errors(tmp_path):
    for args in (("eval", tmp_path / "none.yaml"), ("results", tmp_path / "none.sqlite", "--json")):
        proc = cli(*args, check=False)
        assert proc.returncode == 2 and "no " in proc.stderr and "Traceback" not in proc.stderr


class WantsDepth(Policy):
    name = "wants-depth"

    @property
    def capabilities(self):
        return Capabilities("metaworld-v1", ("images.depth", "state"))


class BadAtStep(Policy):
    """Expert-free policy that emits an out-of-bounds action at step ``bad_step`` of episode 0."""

    name = "bad-at-step"

    @property
    def capabilities(self):
        return Capabilities("metaworld-v1", ("state",))

    def _reset(self, context):
        return {"bad": context.episode_id.endswith("0000")}

    def _act(self, observation, state):
        if state["bad"] and observation["step"] == 10:
            return np.array([0, 0, 7.0, 0], np.float32)
        return np.zeros(4, np.float32)


def test_policy_reading_missing_features_is_refused_before_any_episode(tmp_path, pick_place):
    plan = plan_episodes("metaworld", "MT1:pick-place-v3", ["pick-place-v3"], 2)
    store = RecordStore(tmp_path / "r.sqlite")
    store.create_run("run", plan, {})
    with pytest.raises(ContractError, match="reads features \\['images.depth'\\]"):
        evaluate_sequential(pick_place, WantsDepth(), plan, store, "run", progress=False)
    assert len(store.pending("run")) == 2  # nothing was claimed or run


def test_bad_action_mid_episode_is_recorded_and_the_run_goes_on(tmp_path, pick_place):
    plan = plan_episodes("metaworld", "MT1:pick-place-v3", ["pick-place-v3"], 2)
    store = RecordStore(tmp_path / "r.sqlite")
    store.create_run("run", plan, {})
    df = evaluate_sequential(pick_place, BadAtStep(), plan, store, "run", progress=False)
    first, second = df.iloc[0], df.iloc[1]
    assert first["error_kind"] == "policy" and first["steps"] == 10
    assert "metaworld-v1: action: component 2 = 7 outside [-1, 1]" in first["error_message"]
    assert pd.isna(second["error_kind"]) and second["steps"] == 500 and not second["success"]
    assert set(df["status"]) == {"finished"}


def test_runs_sharing_an_output_dir_keep_their_own_rollout_files(tmp_path):
    from workbench.config import EvalConfig
    from workbench.evaluate import evaluate

    common = dict(benchmark="metaworld", suite="MT1:reach-v3", episodes=1, image_size=32,
                  output_dir=str(tmp_path), progress=False, policy="expert")
    a = evaluate(EvalConfig(**common)).results
    b = evaluate(EvalConfig(**common, policy_options={"defect": "noise", "level": 0.5})).results
    assert a["rollout_path"].iloc[0] != b["rollout_path"].iloc[0]
    steps = [len(np.load(p)["actions"]) for p in (a["rollout_path"].iloc[0],
                                                  b["rollout_path"].iloc[0])]
    assert steps == [a["steps"].iloc[0], b["steps"].iloc[0]]
