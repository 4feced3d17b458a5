"""The sequential test's replay on recorded candidates (workbench.studies.sequential_validation),
on real records laid out as notebook 14 writes them."""

import json
import subprocess
import sys

import numpy as np
import pytest

import workbench
from workbench.ranking.sequential import first_decision
from workbench.studies.sequential_validation import (_floor_episodes, candidate_outcomes,
                                                     design_grid, fewest_deciding,
                                                     fixed_size_progress, replay_pairs,
                                                     summarize)


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
    # 6 discordant reach e = 20.1 >= 20, and a fixed exact test needs 6 as well (2 / 2**6
    # <= 0.05): on a perfect difference the sequential test is at the floor, the sixth
    # discordant episode, before which no test symmetric in A and B can decide at 5%
    assert row.median_episodes == 6 and row.fixed_size == 6
    assert row.floor_median_episodes == 6
    # Wald's SPRT told the effect (A always wins a discordant pair) needs log2(20) -> 5; the
    # matched fixed-size test (power 0.72, the Wilson low end of 10 of 10) still needs 6
    assert row.oracle_median_episodes == 5 and row.fixed_matched == 6
    assert row.matched_power == pytest.approx(0.722, abs=1e-3)
    assert summarize(pairs)["correct_direction_of_decided"] == 1.0


def test_the_floor_is_a_bound_the_test_never_beats():
    # a pair with one discordant episode in three: on every order the sequential test
    # stops at or after the sixth discordant episode, and the floor is exactly there
    x = np.array([1, 1, 0] * 20, float)
    y = np.array([1, 0, 0] * 20, float)
    rng = np.random.default_rng(5)
    for _ in range(20):
        order = rng.permutation(x.size)
        state = first_decision(x[order], y[order], 0.05)
        floor = _floor_episodes(x[order], y[order], 0.05)
        assert np.flatnonzero(x[order] != y[order])[5] + 1 == floor
        assert state.decided and state.episodes >= floor
    assert fewest_deciding(0.05) == 6 and fewest_deciding(0.01) == 8


def test_the_design_grid_shows_what_the_prior_buys():
    # exact (no sampling): on a difference all one way the Beta(1/4) mixture decides on
    # the sixth discordant pair and the KT mixture (1/2) on the seventh, so the first
    # needs fewer episodes; with many discordant pairs of a moderate effect (0.4 of the
    # episodes, A winning 0.75 of them) the KT mixture decides more often
    grid = design_grid((0.5, 0.25), horizon=120).set_index(["prior", "discordance", "share"])
    for rate in (0.1, 0.4):
        assert grid.loc[(0.25, rate, 1.0), "median_episodes"] < \
            grid.loc[(0.5, rate, 1.0), "median_episodes"]
    assert grid.loc[(0.5, 0.4, 0.75), "decided"] > grid.loc[(0.25, 0.4, 0.75), "decided"]
    assert len(grid) == 2 * 4 * 5


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
