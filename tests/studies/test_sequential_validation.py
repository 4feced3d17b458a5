"""The sequential test's replay on recorded candidates (workbench.studies.sequential_validation),
on real records laid out as notebook 14 writes them."""

import json
import subprocess
import sys

import pytest

import workbench
from workbench.studies.sequential_validation import (candidate_outcomes, fixed_size_progress,
                                                     replay_pairs, summarize)


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
    # Wald's SPRT told the effect (A always wins a discordant pair) needs log2(20) -> 5; the
    # matched fixed-size test (power 0.72, the Wilson low end of 10 of 10) still needs 6
    assert row.oracle_median_episodes == 5 and row.fixed_matched == 6
    assert row.matched_power == pytest.approx(0.722, abs=1e-3)
    assert summarize(pairs)["correct_direction_of_decided"] == 1.0


def test_progress_is_replayed_from_the_records(runs):
    outcomes = candidate_outcomes(runs)
    expert = outcomes[outcomes["policy"] == "expert"]
    zero = outcomes[outcomes["policy"] == "zero"]
    assert (expert["progress"] == 1.0).all()  # every expert episode succeeded
    assert zero["progress"].between(0.0, 0.999).all() and zero["progress"].nunique() > 1
    pairs = replay_pairs(outcomes, alpha=0.05, orders=10, metric="progress")
    row = pairs.iloc[0]
    assert (row.reference, row.decided_share, row.correct_of_decided) == ("a", 1.0, 1.0)
    assert row.progress_a == 1.0 and row.matched_power == pytest.approx(0.722, abs=1e-3)
    # the matched fixed-size test is the z-test sized from the pair's own differences
    wide = outcomes.pivot(index="episode", columns="policy", values="progress")
    differences = (wide["expert"] - wide["zero"]).to_numpy()
    assert row.fixed_matched == fixed_size_progress(differences, 0.05, row.matched_power)
    # expert 1.0 against zero's small shaped reward: a z-test sized on the reference needs
    # a single episode, the betting test (which must learn the spread) all nine
    assert (row.fixed_matched, row.median_episodes) == (1, 9)


def test_the_command_line_writes_the_table(runs, tmp_path):
    done = subprocess.run([sys.executable, "-m", "workbench.studies.sequential_validation",
                           str(runs), "--orders", "5", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["pairs"] == 1
    empty = subprocess.run([sys.executable, "-m", "workbench.studies.sequential_validation",
                            str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert empty.returncode == 2 and "expected records" in empty.stderr
