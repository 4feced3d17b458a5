import matplotlib

matplotlib.use("Agg")

import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import pandas as pd  # noqa: E402
import psutil  # noqa: E402

from widgets import probe_panel  # noqa: E402
from workbench.config import PoolConfig  # noqa: E402

CONFIG = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=1,
              policy="expert", image_size=32)
SEARCHED = pd.DataFrame([{"probe": 0, "workers": 1, "replicas": 1, "max_batch": 1,
                          "steps_per_s": 30.0, "busy_cores": 1.0, "peak_mem_gib": 0.7,
                          "status": "ok"}])


def test_probe_panel_runs_probes_and_keeps_history():
    panel = probe_panel(CONFIG | {"search": {"enabled": True}}, max_workers=2, max_replicas=1)
    c = panel.controls
    try:
        c["workers"].value, c["batch"].value, c["wait"].value = 1, 1, 2.5
        assert c["next"].value == "next probe: 1w/1r b1, wait 2.5 ms"
        c["run"].click()
        c["workers"].value, c["batch"].value = 2, 3
        assert c["next"].value == "next probe: 2w/1r b3, wait 2.5 ms"
        c["run"].click()
        history = panel.session.history
        assert list(history["source"]) == ["manual"] * 2
        assert list(zip(history["workers"], history["max_batch"], history["wait_ms"])) == \
            [(1, 1, 2.5), (2, 3, 2.5)], "each probe ran the sliders' configuration"
        assert list(history["episodes"]) == [1, 1], "the whole plan, not what a search left"
        assert (history["steps_per_s"] > 0).all() and (history["successes"] == 1).all()
        assert c["status"].value.startswith("probe 1 (2w/1r b3, wait 2.5 ms): 1 episodes")
        assert "2w/1r b3" in c["table"].value and "manual" in c["table"].value
        assert c["memory"].value.startswith("warm pool: 2 workers, 1 replicas")
        assert bytes(c["plot"].value).startswith(b"\x89PNG")
        held = panel.session.pool.pids()
        assert len(held) == 3 and all(psutil.pid_exists(pid) for pid in held)
        c["close"].click()
        assert c["memory"].value == "no pool running" and c["close"].disabled
        assert not any(_alive(pid) for pid in held), "Close pool stopped its processes"
    finally:
        panel.session.close()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_probe_panel_refuses_a_configuration_beyond_its_pool_and_stays_usable():
    panel = probe_panel(CONFIG, max_workers=2, max_replicas=2)
    c = panel.controls
    try:
        c["workers"].value, c["replicas"].value = 1, 2
        c["run"].click()
        assert c["status"].value.startswith("probe 1w/2r b2 failed: ")
        assert "more replicas than workers" in c["status"].value
        assert panel.session.rows == [] and panel.session.pool is None
        assert not c["run"].disabled
    finally:
        panel.session.close()


def test_probe_panel_starts_from_a_search_and_plots_beside_its_probes():
    panel = probe_panel(CONFIG, max_workers=2, max_replicas=1, history=SEARCHED,
                        start=PoolConfig(2, 1, max_wait_ms=7.5))
    c = panel.controls
    try:
        assert (c["workers"].value, c["replicas"].value, c["batch"].value, c["wait"].value) \
            == (2, 1, 2, 7.5)
        assert c["next"].value == "next probe: 2w/1r b2, wait 7.5 ms"
        seeded = bytes(c["plot"].value)
        assert seeded.startswith(b"\x89PNG")  # the search's probes are plotted already
        assert "search" in c["table"].value
        c["run"].click()
        after = bytes(c["plot"].value)
        assert after.startswith(b"\x89PNG") and after != seeded
        history = panel.session.history
        assert list(history["source"]) == ["search", "manual"]
        assert history.iloc[1]["workers"] == 2 and history.iloc[1]["probe"] == 1
        assert history.iloc[1]["wait_ms"] == 7.5
    finally:
        panel.session.close()


POOL_AT_EXIT = """
import sys, time
from workbench.studies.runtime import ProbeSession
from workbench.config import PoolConfig
session = ProbeSession(dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=1,
                            policy="expert", image_size=32), 2, 1)
session.probe(PoolConfig(2, 1))
print(" ".join(str(p) for p in session.pool.pids()), flush=True)
"""


def test_a_probe_sessions_pool_is_stopped_when_the_interpreter_exits(tmp_path):
    """A kernel shut down runs the interpreter's exit: the warm pool goes with it."""
    done = subprocess.run([sys.executable, "-c", POOL_AT_EXIT], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 3
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids)


# --- the annotator panel: two videos, A / B / invalid, durable and resumable ----------

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import ipywidgets  # noqa: E402
import numpy as np  # noqa: E402

from widgets import annotator_panel  # noqa: E402
from widgets.annotator import NO_VIDEO  # noqa: E402
from workbench.ranking.annotation import sample_annotation_pairs  # noqa: E402
from workbench.ranking.sampling import demo_rollout_table  # noqa: E402

POLICIES = ["expert-alpha", "noisy-beta", "jerky-gamma"]


def annotation_pairs(tmp_path, videos=True):
    """12 pairs; each rollout's 'video' is a file of distinct bytes named after its policy,
    so the test can tell which rollout a slot shows while the panel must not say it."""
    table = demo_rollout_table(POLICIES, tasks=["reach", "push"], inits=4, repeats=1)
    table["success"] = np.random.default_rng(0).random(len(table)) < 0.5
    clips = {}
    for k, rid in enumerate(table["rollout_id"]):
        clip = tmp_path / f"{rid.replace('/', '_')}.mp4"
        clip.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes([k]) * 16)
        clips[rid] = clip
    if videos:
        table["video"] = table["rollout_id"].map(lambda r: str(clips[r]))
    pairs = sample_annotation_pairs(table, n_pairs=12, seed=0).pairs
    by_bytes = {clip.read_bytes(): rid for rid, clip in clips.items()}
    return table, pairs, by_bytes


def displayed(widget):
    """Every string a widget tree shows, and its Video widgets."""
    texts, videos = [], []
    for attr in ("value", "description", "tooltip", "placeholder"):
        value = getattr(widget, attr, None)
        if isinstance(value, str):
            texts.append(value)
    if isinstance(widget, ipywidgets.Video):
        videos.append(widget)
    for child in getattr(widget, "children", ()):
        more_texts, more_videos = displayed(child)
        texts += more_texts
        videos += more_videos
    return texts, videos


def slot_rollouts(panel, by_bytes):
    """The rollouts shown as A and B (from the bytes in the two video players)."""
    a, b = panel.children[2].children
    return tuple(by_bytes[bytes(slot.children[1].value)] for slot in (a, b))


def buttons(panel):
    return {b.description: b for b in panel.children[3].children}


def test_annotator_records_answers_and_maps_a_b_back_to_rollouts(tmp_path):
    table, pairs, by_bytes = annotation_pairs(tmp_path)
    path = tmp_path / "answers" / "ana.jsonl"
    path.parent.mkdir()
    panel = annotator_panel(pairs, path, "ana", seed=3)
    assert panel.children[0].value == "0 / 12 answered"
    clicks, shown = ["A", "B", "invalid", "A", "B"], []
    for choice in clicks:
        shown.append(slot_rollouts(panel, by_bytes))
        instruction = panel.children[1].value
        assert pairs.loc[len(shown) - 1, "task"] in instruction
        buttons(panel)[choice].click()
    assert panel.children[0].value == "5 / 12 answered"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["pair_id"] for r in rows] == list(pairs["pair_id"][:5])
    assert [r["choice"] for r in rows] == clicks  # "invalid" recorded as such
    assert all(r["annotator"] == "ana" and r["timestamp"] for r in rows)
    for row, (a, b), pair in zip(rows, shown, pairs.itertuples()):
        assert (row["shown_a"], row["shown_b"]) == (a, b)  # what was on screen as A and B
        assert {a, b} == {pair.rollout_a, pair.rollout_b}
    winners = [r["shown_a"] if r["choice"] == "A" else r["shown_b"] for r in rows if r["choice"] != "invalid"]
    assert winners == [shown[0][0], shown[1][1], shown[3][0], shown[4][1]]


def test_annotator_randomises_a_b_per_pair_and_per_annotator(tmp_path):
    _, pairs, by_bytes = annotation_pairs(tmp_path)
    orders = {}
    for name in ("ana", "ben"):
        panel = annotator_panel(pairs, tmp_path / f"{name}.jsonl", name, seed=3)
        seen = []
        for _ in range(len(pairs)):
            seen.append(slot_rollouts(panel, by_bytes)[0])
            buttons(panel)["A"].click()
        orders[name] = seen
    as_sampled = [a == r for a, r in zip(orders["ana"], pairs["rollout_a"])]
    assert 0 < sum(as_sampled) < len(pairs)  # some pairs flipped, some not
    assert orders["ana"] != orders["ben"]  # another annotator, another coin


def test_annotator_never_shows_policies_or_rollout_ids(tmp_path):
    table, pairs, _ = annotation_pairs(tmp_path)
    panel = annotator_panel(pairs, tmp_path / "ana.jsonl", "ana")
    secrets = POLICIES + list(table["rollout_id"]) + list(table["video"])
    for _ in range(len(pairs)):
        texts, videos = displayed(panel)
        assert len(videos) == 2 and all(bytes(v.value) for v in videos)
        leaks = [s for s in secrets for t in texts if s in t]
        assert not leaks, leaks
        buttons(panel)["B"].click()
    assert "All pairs answered" in panel.children[1].value
    assert all(b.disabled for b in buttons(panel).values())


def test_annotator_resumes_at_the_first_unanswered_pair(tmp_path):
    _, pairs, by_bytes = annotation_pairs(tmp_path)
    path = tmp_path / "ana.jsonl"
    first = annotator_panel(pairs, path, "ana", seed=3)
    for _ in range(4):
        buttons(first)["A"].click()
    expected = slot_rollouts(first, by_bytes)  # pair 4, unanswered
    reopened = annotator_panel(pairs, path, "ana", seed=3)
    assert reopened.children[0].value == "4 / 12 answered"
    assert slot_rollouts(reopened, by_bytes) == expected
    buttons(reopened)["invalid"].click()
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["pair_id"] for r in rows] == list(pairs["pair_id"][:5])
    assert rows[-1]["choice"] == "invalid" and (rows[-1]["shown_a"], rows[-1]["shown_b"]) == expected


def test_annotator_offers_no_pair_without_videos_unless_asked_for_text(tmp_path):
    _, pairs, _ = annotation_pairs(tmp_path, videos=False)
    panel = annotator_panel(pairs, tmp_path / "ana.jsonl", "ana")
    assert panel.children[0].value == "0 / 0 answered"
    assert "No pair to annotate" in panel.children[1].value
    assert "12 of 12 pairs lack a video" in panel.children[5].value
    assert all(b.disabled for b in buttons(panel).values())

    text = annotator_panel(pairs, tmp_path / "ben.jsonl", "ben", text_only=True)
    texts, videos = displayed(text)
    assert videos == [] and texts.count(NO_VIDEO) == 2
    buttons(text)["A"].click()
    assert text.children[0].value == "1 / 12 answered"


def test_annotator_offers_only_pairs_whose_two_rollouts_have_videos(tmp_path):
    table, pairs, by_bytes = annotation_pairs(tmp_path)
    missing = pairs.loc[[1, 4], "rollout_b"].tolist()
    for rid in missing:  # two rollouts lose their video file
        Path(table.set_index("rollout_id").at[rid, "video"]).unlink()
    lacking = {k for k, p in pairs.iterrows() if {p.rollout_a, p.rollout_b} & set(missing)}
    panel = annotator_panel(pairs, tmp_path / "ana.jsonl", "ana")
    offered = len(pairs) - len(lacking)
    assert panel.children[0].value == f"0 / {offered} answered"
    assert f"{len(lacking)} of {len(pairs)} pairs lack a video" in panel.children[5].value
    for _ in range(offered):
        assert not set(slot_rollouts(panel, by_bytes)) & set(missing)
        buttons(panel)["A"].click()
    rows = [json.loads(x) for x in (tmp_path / "ana.jsonl").read_text().splitlines()]
    assert sorted(r["pair_id"] for r in rows) == sorted(set(pairs["pair_id"]) - lacking)


def test_annotator_creates_the_folder_of_its_answers_file(tmp_path):
    _, pairs, _ = annotation_pairs(tmp_path)
    path = tmp_path / "fresh" / "clone" / "annotations" / "ana.jsonl"
    panel = annotator_panel(pairs, path, "ana")
    buttons(panel)["A"].click()
    assert panel.children[0].value == "1 / 12 answered"
    assert [json.loads(x)["choice"] for x in path.read_text().splitlines()] == ["A"]


def test_annotator_stops_with_where_and_why_when_an_answer_cannot_be_written(tmp_path):
    _, pairs, _ = annotation_pairs(tmp_path)
    path = tmp_path / "answers" / "ana.jsonl"
    panel = annotator_panel(pairs, path, "ana")
    buttons(panel)["B"].click()
    kept = path.rename(tmp_path / "kept.jsonl")
    path.mkdir()  # the answers file is now a folder: the next answer cannot be appended
    buttons(panel)["A"].click()
    status = panel.children[4].value
    assert f"cannot use {path}" in status and "Is a directory" in status
    assert "The answers saved before this one (1) are kept" in status
    assert all(b.disabled for b in buttons(panel).values()), "nothing to click until fixed"
    assert panel.children[0].value == "1 / 12 answered"
    assert [json.loads(x)["choice"] for x in kept.read_text().splitlines()] == ["B"]

    reopened = annotator_panel(pairs, path, "ana")  # still broken: refused at the start
    assert f"cannot use {path}" in reopened.children[4].value
    assert all(b.disabled for b in buttons(reopened).values())
    assert reopened.annotation_log is None
