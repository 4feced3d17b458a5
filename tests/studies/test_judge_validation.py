"""Held-out validation: candidates from training, the judge on every pool episode, and
success-of-K against BT-over-preferences scored on redraws."""

import numpy as np
import pandas as pd
import pytest
import torch

from workbench.contracts.capabilities import EpisodeContext, LoadContext
from workbench.policies import make_policy
from workbench.studies import judge_validation as va
from workbench.ranking.judges.base import Preference
from workbench.ranking.sampling import demo_rollout_table
from workbench.studies.candidates import CandidateConfig, train_candidates

POLICIES = ["p", "q", "r"]


class ByName:
    """Prefers the rollout of the policy earlier in POLICIES (ids are policy/task/init/rep)."""

    name = "by-name"

    def __init__(self):
        self.asked = []

    def compare(self, a, b, task):
        self.asked.append((a.rollout_id, b.rollout_id))
        rank = {p: k for k, p in enumerate(POLICIES)}
        better_a = rank[a.rollout_id.split("/")[0]] < rank[b.rollout_id.split("/")[0]]
        return Preference(winner="A" if better_a else "B", raw="")


@pytest.fixture
def pool():
    table = demo_rollout_table(POLICIES, tasks=["t1", "t2"], inits=3, repeats=1)
    table["success"] = (table["policy"] != "r") & (table["init_id"] != 2)
    return table


def test_judge_asked_once_per_pair_and_episode_with_both_orders(pool):
    judge = ByName()
    verdicts = va.judge_episode_pairs(pool, judge, seed=0)
    assert len(verdicts) == len(judge.asked) == 3 * 6  # 3 pairs x 6 episodes
    assert verdicts[["policy_i", "policy_j", "task", "init_id"]].drop_duplicates().shape[0] == 18
    shown_first = {a.split("/")[0] for a, _ in judge.asked}
    assert shown_first == {"p", "q", "r"}  # A/B order is drawn, not fixed
    assert (verdicts["winner_policy"] == verdicts["policy_i"]).all()  # i is earlier: it wins


def test_episode_arrays_count_each_verdict_once(pool):
    verdicts = va.judge_episode_pairs(pool, ByName(), seed=0)
    keys, success, wins = va.episode_arrays(pool, verdicts, POLICIES)
    assert success.shape == (6, 3) and wins.shape == (6, 3, 3)
    assert success.sum(axis=0).tolist() == [4, 4, 0]
    assert wins.sum(axis=0).tolist() == [[0, 6, 6], [0, 0, 6], [0, 0, 0]]


def test_preference_ranks_what_tied_successes_cannot():
    # 10 episodes, 3 candidates: every success ties (all succeed), the judge orders them
    success = np.ones((10, 3), int)
    wins = np.zeros((10, 3, 3), int)
    wins[:, 0, 1] = wins[:, 0, 2] = wins[:, 1, 2] = 1
    table = va.draw_rankings(success, wins, reference=[0.9, 0.5, 0.2], ks=[3], draws=5,
                             n_boot=20, seed=0)
    by = table.set_index("method")
    assert not by.loc["success", "ranked"].any() and by.loc["success", "spearman"].isna().all()
    assert (by.loc["preference", "spearman"] == 1.0).all()
    assert (by.loc["preference", "mmrv"] == 0.0).all()
    assert (by.loc["success", "mmrv"] > 0).all()  # ties against an order are violations
    difference = va.paired_difference(table)
    assert difference.loc[0, "preference_closer_rho"] == 1.0
    assert difference.loc[0, "rho_diff"] == 1.0  # untied success counts as rho 0


def test_redraws_use_the_same_episodes_for_both_methods():
    rng = np.random.default_rng(1)
    success = rng.integers(0, 2, size=(12, 4))
    wins = np.zeros((12, 4, 4), int)
    table = va.draw_rankings(success, wins, reference=[0.8, 0.6, 0.4, 0.2], ks=[12],
                             draws=3, n_boot=10, seed=0)
    rates = success.mean(axis=0)  # K = all episodes: every draw is the whole pool
    for _, row in table[table["method"] == "success"].iterrows():
        assert [row[f"score[{i}]"] for i in range(4)] == pytest.approx(rates.tolist())


def test_summary_intervals_contain_medians_and_verdict_follows_them():
    rng = np.random.default_rng(0)
    success = rng.integers(0, 2, size=(30, 4))
    wins = np.zeros((30, 4, 4), int)
    wins[:, 0, 1] = wins[:, 1, 2] = wins[:, 2, 3] = 1
    table = va.draw_rankings(success, wins, reference=[0.8, 0.6, 0.4, 0.2], ks=[5, 10],
                             draws=40, n_boot=20, seed=0)
    summary = va.summarize_validation(table)
    assert list(summary["k"]) == [5, 5, 10, 10] and (summary["draws"] == 40).all()
    for row in summary.itertuples():  # each cell is the median and percentiles of its draws
        part = table[(table["k"] == row.k) & (table["method"] == row.method)]
        for metric in ("spearman", "mmrv", "ci_width"):
            values = part[metric].dropna()
            assert getattr(row, metric) == pytest.approx(values.median())
            assert getattr(row, f"{metric}_lower") == pytest.approx(np.percentile(values, 2.5))
            assert getattr(row, f"{metric}_upper") == pytest.approx(np.percentile(values, 97.5))
    verdict = va.validation_verdict(summary, va.paired_difference(table))
    assert verdict["closer_by_spearman"].tolist() == ["preference", "preference"]
    lines = va.validation_findings(summary, va.paired_difference(table),
                                   pd.DataFrame({"rate": [0.8, 0.2], "n": [10, 10],
                                                 "separated_from_next": [True, np.nan]}))
    assert lines[0].endswith("separate 1 of 1 neighbouring pairs.")
    assert lines[1].startswith("K = 5:") and "Closer by median rho: preference" in lines[1]


def test_bad_k_and_split_refused():
    with pytest.raises(ValueError, match=r"every K must lie in \[1, 4\]"):
        va.draw_rankings(np.ones((4, 2)), np.zeros((4, 2, 2)), [0.5, 0.4], ks=[5])
    with pytest.raises(ValueError, match="pool_inits must leave both"):
        va.split_by_init(pd.DataFrame({"init_id": [0, 1]}), 2)
    with pytest.raises(ValueError, match="is the one the candidates' demonstrations came from"):
        va.collect_candidate_rollouts(pd.DataFrame(), "MT10", ["reach-v3"], 2, "x", seed=1,
                                      demo_seed=1)


def test_reference_table_flags_separated_neighbours():
    rows = [("a", s) for s in [1] * 95 + [0] * 5] + [("b", s) for s in [1] * 50 + [0] * 50] \
        + [("c", s) for s in [1] * 45 + [0] * 55]
    table = va.reference_table(pd.DataFrame(rows, columns=["policy", "success"]))
    assert table["policy"].tolist() == ["a", "b", "c"]
    assert table["separated_from_next"].tolist()[:2] == [True, False]
    assert np.isnan(table["separated_from_next"].iloc[2])


def test_candidates_trained_saved_and_reused(tmp_path):
    config = CandidateConfig(tasks=("reach-v3",), checkpoint_demos=1, checkpoint_steps=(2, 30),
                             data_demos=(2,), data_steps=5, nearest_demos=(1,), width=32)
    table = train_candidates(config, tmp_path)
    assert table["candidate"].tolist() == config.names()
    assert table["family"].tolist() == ["checkpoint", "checkpoint", "data", "nearest"]
    early, late = (torch.load(p, weights_only=False)["state_dict"] for p in table["file"][:2])
    assert not torch.equal(early["body.0.weight"], late["body.0.weight"])  # saved mid-training
    assert table.loc[0, "final_loss"] > table.loc[1, "final_loss"]
    again = train_candidates(config, tmp_path)  # same config: reused, not retrained
    assert again["file"].tolist() == table["file"].tolist()
    stamp = (tmp_path / "candidates.json").stat().st_mtime_ns
    train_candidates(config, tmp_path)
    assert (tmp_path / "candidates.json").stat().st_mtime_ns == stamp


def test_candidate_policies_act_from_their_files(tmp_path):
    config = CandidateConfig(tasks=("reach-v3",), checkpoint_demos=1, checkpoint_steps=(5,),
                             data_demos=(), nearest_demos=(1,), width=32)
    table = train_candidates(config, tmp_path)
    observation = {"privileged.state": np.linspace(-1, 1, 39).astype(np.float32),
                   "instruction": "reach the goal position", "episode_id": "e"}
    for row in table.itertuples():
        policy = make_policy(row.policy, **row.options)
        assert policy.name == row.candidate and policy.capabilities.privileged
        policy.load(LoadContext("metaworld-v1"))
        policy.reset(EpisodeContext("e", "reach-v3", "reach the goal position", 0))
        chunk = policy.act(observation)
        assert chunk.shape == (config.chunk_size, 4) and np.all(np.abs(chunk) <= 1.0 + 1e-6)
    with pytest.raises(ValueError, match="not a state-bc weights file"):
        make_policy("state-bc", weights=table.loc[1, "file"])  # an npz memory, not weights


def test_candidate_config_refuses_overlapping_families():
    with pytest.raises(ValueError, match="repeats checkpoint_demos"):
        CandidateConfig(checkpoint_demos=3, data_demos=(3,))
    with pytest.raises(ValueError, match="checkpoint_steps: expected distinct integers"):
        CandidateConfig(checkpoint_steps=(10, 10))


def test_reference_reliability_high_for_clear_gaps_low_for_equals():
    rng = np.random.default_rng(0)
    rows = []
    for policy, rate in (("a", 0.9), ("b", 0.5), ("c", 0.1), ("d", 0.5), ("e", 0.5)):
        for init in range(400):
            rows.append((policy, "t", init, rng.random() < rate))
    table = pd.DataFrame(rows, columns=["policy", "task", "init_id", "success"])
    clear = va.reference_reliability(table[table["policy"].isin(["a", "b", "c"])], draws=50)
    assert clear["median"] == pytest.approx(1.0) and clear["episodes_per_half"] == 200
    equal = va.reference_reliability(table[table["policy"].isin(["b", "d", "e"])], draws=50)
    assert equal["lower"] < 0 < equal["upper"]  # three equal candidates: halves disagree


def test_no_extra_reference_seeds_gives_an_empty_table():
    out = va.collect_reference_rollouts(pd.DataFrame(), "MT10", ["reach-v3"], [], 5, "unused")
    assert out.empty and "task_set" in out.columns
    with pytest.raises(ValueError, match="reference task set 0 is the pool's"):
        va.collect_reference_rollouts(pd.DataFrame(), "MT10", ["reach-v3"], [2, 0], 5, "x")


def test_a_policy_error_is_a_failure_and_a_harness_error_stops_the_study(monkeypatch, tmp_path):
    from types import SimpleNamespace

    def results(kind):
        return pd.DataFrame({"policy": ["p", "p"], "task": "reach-v3", "init_state_id": [0, 1],
                             "rollout_path": ["a.npz", "b.npz"], "video_path": None,
                             "success": [True, None], "steps": [40, 3],
                             "error_kind": [None, kind], "error_message": [None, "boom"]})

    candidates = pd.DataFrame({"candidate": ["p"], "policy": ["zero"], "options": [{}]})
    monkeypatch.setattr(va, "run", lambda config: SimpleNamespace(results=results("policy")))
    table = va.collect_candidate_rollouts(candidates, "MT10", ["reach-v3"], 2, tmp_path)
    assert table["success"].tolist() == [True, False]  # the policy's error is its failure
    monkeypatch.setattr(va, "run", lambda config: SimpleNamespace(results=results("infrastructure")))
    with pytest.raises(RuntimeError, match="1 episodes ended in infrastructure errors"):
        va.collect_candidate_rollouts(candidates, "MT10", ["reach-v3"], 2, tmp_path)
