"""The sequential test's replay on recorded candidates (workbench.studies.sequential_validation),
on real records laid out as notebook 14 writes them."""

import json
import subprocess
import sys

import pytest

import workbench
from workbench.studies.sequential_validation import candidate_outcomes, replay_pairs, summarize


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("judge-validation")
    for name in ("expert", "zero"):
        workbench.run({"benchmark": "metaworld", "suite": "MT1:reach-v3", "episodes": 9,
                       "policy": name, "image_size": 32, "max_steps": 60, "progress": False,
                       "output_dir": str(root / "rollouts" / name)})
    return root


def test_the_replay_decides_the_way_the_reference_goes(runs):
    outcomes = candidate_outcomes(runs)
    assert len(outcomes) == 18 and set(outcomes["policy"]) == {"expert", "zero"}
    pairs = replay_pairs(outcomes, alpha=0.05, orders=10)
    row = pairs.iloc[0]
    assert (row.a, row.b, row.reference) == ("expert", "zero", "a")
    assert row.decided_share == 1.0 and row.correct_of_decided == 1.0
    # 7 discordant reach e = 26.8 >= 20; a fixed exact test needs 6 (2 / 2**6 <= 0.05): a
    # perfect difference is where anytime validity costs an episode
    assert row.median_episodes == 7 and row.fixed_size == 6
    assert summarize(pairs)["correct_direction_of_decided"] == 1.0


def test_the_command_line_writes_the_table(runs, tmp_path):
    done = subprocess.run([sys.executable, "-m", "workbench.studies.sequential_validation",
                           str(runs), "--orders", "5", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["pairs"] == 1
    empty = subprocess.run([sys.executable, "-m", "workbench.studies.sequential_validation",
                            str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert empty.returncode == 2 and "expected records" in empty.stderr
