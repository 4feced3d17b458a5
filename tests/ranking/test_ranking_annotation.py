"""R2S-Eval's 200 task-stratified annotation pairs (66 success-success, 67 failure-failure,
67 success-failure), with the shortfall reported where the rollouts cannot give them."""

from collections import Counter

import numpy as np
import pytest

from workbench.ranking.annotation import sample_annotation_pairs, split_counts
from workbench.ranking.sampling import demo_rollout_table

TASKS = ["t1", "t2", "t3", "t4"]


def rollouts(seed=0, success_rate=0.5):
    table = demo_rollout_table(["p", "q", "r", "s"], tasks=TASKS, inits=20, repeats=1)
    rng = np.random.default_rng(seed)
    table["success"] = rng.random(len(table)) < success_rate
    table["video"] = [f"/videos/{rid.replace('/', '_')}.mp4" for rid in table["rollout_id"]]
    return table


def test_two_hundred_pairs_split_66_67_67_and_spread_over_tasks():
    table = rollouts()
    sample = sample_annotation_pairs(table, seed=3)
    pairs = sample.pairs
    assert len(pairs) == 200 and sample.shortfall == {k: 0 for k in sample.wanted}
    assert Counter(pairs["outcome"]) == {"success-success": 66, "failure-failure": 67,
                                         "success-failure": 67}
    success = table.set_index("rollout_id")["success"]
    both = success[pairs["rollout_a"]].to_numpy().astype(int) \
        + success[pairs["rollout_b"]].to_numpy().astype(int)
    assert (both == pairs["outcome"].map({"success-success": 2, "success-failure": 1,
                                          "failure-failure": 0})).all()
    # task-stratified: within a class, every task gives as many pairs as the others (within
    # one) unless it ran out of candidate pairs of that class
    wins = table.groupby(["task", "init_id"])["success"].sum()  # successes of 4 policies
    available = {"success-success": wins * (wins - 1) // 2,
                 "failure-failure": (4 - wins) * (3 - wins) // 2,
                 "success-failure": wins * (4 - wins)}
    for outcome, part in pairs.groupby("outcome"):
        counts = part["task"].value_counts().reindex(TASKS, fill_value=0)
        room = available[outcome].groupby("task").sum().reindex(TASKS)
        spare = counts < room  # tasks with candidate pairs left over
        assert (counts <= room).all() and spare.any()
        assert counts[spare].max() - counts[spare].min() <= 1
        assert (counts[~spare] <= counts[spare].max()).all()
    key = table.set_index("rollout_id")
    assert (key.loc[pairs["rollout_a"], "task"].to_numpy() == pairs["task"]).all()
    assert (key.loc[pairs["rollout_a"], "init_id"].to_numpy()
            == key.loc[pairs["rollout_b"], "init_id"].to_numpy()).all()
    assert (pairs["policy_a"] != pairs["policy_b"]).all()
    assert not pairs[["rollout_a", "rollout_b"]].apply(frozenset, axis=1).duplicated().any()
    assert pairs["video_a"].str.endswith(".mp4").all()


def test_a_b_order_is_randomised_not_the_table_order():
    pairs = sample_annotation_pairs(rollouts(), seed=3).pairs
    first = pairs["policy_a"] < pairs["policy_b"]  # the candidate order puts i before j
    assert 70 <= first.sum() <= 130  # a fair coin over 200 pairs (about 4.2 sd each side)


def test_the_shortfall_is_reported_not_filled_from_another_class():
    table = rollouts(success_rate=0.8)  # few failures: few failure-failure pairs
    sample = sample_annotation_pairs(table, seed=0)
    failed = table[~table["success"]]
    per_key = failed.groupby(["task", "init_id"]).size()
    possible = int((per_key * (per_key - 1) // 2).sum())  # two failed policies, one start
    got = Counter(sample.pairs["outcome"])
    assert got["failure-failure"] == possible < 67
    assert sample.shortfall == {"success-success": 0, "failure-failure": 67 - possible,
                                "success-failure": 0}
    assert len(sample.pairs) == 200 - (67 - possible)


def test_split_scales_and_bad_tables_are_refused():
    assert split_counts(200) == {"success-success": 66, "failure-failure": 67,
                                 "success-failure": 67}
    assert sum(split_counts(50).values()) == 50
    with pytest.raises(ValueError, match="needs a success column"):
        sample_annotation_pairs(rollouts().drop(columns="success"))
