"""R2S-Eval's 200 task-stratified annotation pairs (66 success-success, 67 failure-failure,
67 success-failure), with the shortfall reported where the rollouts cannot give them."""

from collections import Counter

import numpy as np
import pandas as pd
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


# --- answer files: what an annotator is shown, durable appends, resume ---------------

import json  # noqa: E402

from workbench.ranking import annotation as ann  # noqa: E402
from workbench.ranking.annotation import (AnnotationLog, presentation_order,  # noqa: E402
                                          read_answers, simulated_annotations)


def small_pairs(n_pairs=24):
    return sample_annotation_pairs(rollouts(), n_pairs=n_pairs, seed=1).pairs


def test_presentation_hides_policies_and_redraws_a_b_per_annotator():
    pairs = small_pairs()
    ana, ben = presentation_order(pairs, "ana", seed=0), presentation_order(pairs, "ben", seed=0)
    assert not any("policy" in c for c in ana.columns)
    for shown in (ana, ben):  # the same two rollouts, in either order
        assert (shown[["shown_a", "shown_b"]].apply(frozenset, axis=1)
                == pairs[["rollout_a", "rollout_b"]].apply(frozenset, axis=1)).all()
    kept = (ana["shown_a"] == pairs["rollout_a"]).sum()
    assert 0 < kept < len(pairs)  # some pairs swapped, some not
    assert (ana["shown_a"] != ben["shown_a"]).any()  # each annotator has their own coin
    assert ana.equals(presentation_order(pairs, "ana", seed=0))  # reproducible
    assert not ana.equals(presentation_order(pairs, "ana", seed=1))
    video = dict(zip(pairs["rollout_a"], pairs["video_a"])) | dict(zip(pairs["rollout_b"],
                                                                       pairs["video_b"]))
    assert (ana["video_shown_a"] == ana["shown_a"].map(video)).all()


def test_log_appends_fsynced_rows_and_resumes_at_the_first_unanswered_pair(tmp_path, monkeypatch):
    synced = []
    real_fsync = ann.os.fsync
    monkeypatch.setattr(ann.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    pairs, path = small_pairs(), tmp_path / "ana.jsonl"
    log = AnnotationLog(path, "ana", pairs, seed=4)
    first = log.next_pair()
    row = log.record(int(first["pair_id"]), "a", timestamp="2026-01-01T00:00:00+00:00")
    log.record(int(log.next_pair()["pair_id"]), "invalid")
    assert len(synced) == 2  # one fsync per answer
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0] == {"annotator": "ana", "pair_id": int(pairs["pair_id"][0]),
                        "shown_a": first["shown_a"], "shown_b": first["shown_b"],
                        "choice": "A", "timestamp": "2026-01-01T00:00:00+00:00"} == row
    assert lines[1]["choice"] == "invalid" and lines[1]["pair_id"] == int(pairs["pair_id"][1])
    again = AnnotationLog(path, "ana", pairs, seed=4)
    assert again.progress() == (2, len(pairs))
    assert int(again.next_pair()["pair_id"]) == int(pairs["pair_id"][2])
    with pytest.raises(ValueError, match="already answered pair"):
        again.record(int(pairs["pair_id"][0]), "B")
    with pytest.raises(ValueError, match="choice: expected one of"):
        again.record(int(pairs["pair_id"][2]), "C")
    assert len(path.read_text().splitlines()) == 2  # refused answers are not written


def test_log_refuses_another_annotators_file_and_another_sample(tmp_path):
    pairs, path = small_pairs(), tmp_path / "ana.jsonl"
    AnnotationLog(path, "ana", pairs).record(0, "B")
    with pytest.raises(ValueError, match=r"holds answers of \['ana'\], not of 'ben'"):
        AnnotationLog(path, "ben", pairs)
    other = sample_annotation_pairs(rollouts(seed=5), n_pairs=24, seed=9).pairs
    with pytest.raises(ValueError, match="another sample"):
        AnnotationLog(path, "ana", other)


def test_malformed_answer_files_name_the_file_and_line(tmp_path):
    good = {"annotator": "ana", "pair_id": 0, "shown_a": "x", "shown_b": "y", "choice": "A",
            "timestamp": "t"}
    second = good | {"pair_id": 1}
    cases = {"choice": (second | {"choice": "maybe"}, "choice: expected one of"),
             "pair": (second | {"pair_id": "seven"}, "pair_id: expected an integer"),
             "same": (second | {"shown_b": "x"}, "shown_a and shown_b are the same rollout"),
             "missing": ({k: v for k, v in second.items() if k != "choice"},
                         r"missing fields \['choice'\]")}
    for name, (bad, message) in cases.items():
        path = tmp_path / f"{name}.jsonl"  # a blank line 2 is skipped, not renumbered
        path.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n")
        with pytest.raises(ValueError, match=f"{name}.jsonl: line 3: {message}"):
            read_answers(path)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(good) + "\n{\"annotator\": \"ana\", \"pai\n")
    with pytest.raises(ValueError, match="broken.jsonl: line 2: not JSON"):
        read_answers(broken)
    twice = tmp_path / "twice.jsonl"
    twice.write_text(json.dumps(good) + "\n" + json.dumps(good | {"choice": "B"}) + "\n")
    with pytest.raises(ValueError, match="answered pair 0 more than once"):
        read_answers(twice)
    table = tmp_path / "sheet.csv"
    table.write_text("annotator,pair_id,shown_a,shown_b,choice,timestamp\n"
                     "ana,0,x,y,b,t\nana,1,x,y,C,t\n")
    with pytest.raises(ValueError, match="sheet.csv: line 3: choice: expected one of"):
        read_answers(table)
    table.write_text("annotator,pair_id,shown_a,shown_b,choice,timestamp\nana,0,x,y, b ,t\n")
    assert read_answers(table)[["pair_id", "choice"]].values.tolist() == [[0, "B"]]


def test_simulated_annotators_flip_the_reference_at_their_rate_and_say_so():
    pairs = sample_annotation_pairs(rollouts(), n_pairs=200, seed=2).pairs
    reference = dict(zip(pairs["pair_id"], pairs["rollout_a"]))
    sim = simulated_annotations(pairs, reference, flip_probs=[0.0, 0.3, 1.0], invalid_prob=0.1,
                                seed=0)
    assert sorted(sim["annotator"].unique()) == ["simulated-1", "simulated-2", "simulated-3"]
    assert (sim["timestamp"] == "simulated").all()
    valid = sim[sim["choice"] != "invalid"]
    agrees = np.where(valid["choice"] == "A", valid["shown_a"], valid["shown_b"]) \
        == valid["pair_id"].map(reference).to_numpy()
    rate = pd.Series(agrees, index=valid.index).groupby(valid["annotator"]).mean()
    assert rate["simulated-1"] == 1.0 and rate["simulated-3"] == 0.0
    assert abs(rate["simulated-2"] - 0.7) < 4 * np.sqrt(0.21 / len(valid) * 3)  # 4 sd
    invalid = sim["choice"].eq("invalid").mean()
    assert abs(invalid - 0.1) < 4 * np.sqrt(0.09 / len(sim))
    assert sim.equals(simulated_annotations(pairs, reference, [0.0, 0.3, 1.0], 0.1, seed=0))


def test_load_video_reads_bytes_or_says_there_is_none(tmp_path):
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"\x00\x00\x00\x18ftypmp42")
    assert ann.load_video(clip) == (b"\x00\x00\x00\x18ftypmp42", "mp4")
    assert ann.load_video(None) is None and ann.load_video(tmp_path / "gone.mp4") is None
