import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from widgets import probe_panel  # noqa: E402
from workbench.config import PoolConfig  # noqa: E402

CONFIG = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=1,
              policy="expert", image_size=32)
SEARCHED = pd.DataFrame([{"probe": 0, "workers": 1, "replicas": 1, "max_batch": 1,
                          "steps_per_s": 30.0, "busy_cores": 1.0, "peak_mem_gib": 0.7,
                          "status": "ok"}])


def test_probe_panel_runs_probes_and_keeps_history():
    panel = probe_panel(CONFIG, max_workers=2, max_replicas=1)
    try:
        sliders, button = panel.children[0].children, panel.children[2].children[0]
        sliders[0].value = 1
        button.click()
        sliders[0].value = 2
        button.click()
        history = panel.session.history
        assert list(history["workers"]) == [1, 2] and list(history["source"]) == ["manual"] * 2
        assert (history["steps_per_s"] > 0).all() and (history["successes"] == 1).all()
        assert "steps/s" in panel.children[2].children[1].value
        assert bytes(panel.children[3].value).startswith(b"\x89PNG")
    finally:
        panel.session.close()


def test_probe_panel_starts_from_a_search_and_plots_beside_its_probes():
    panel = probe_panel(CONFIG, max_workers=2, max_replicas=1, history=SEARCHED,
                        start=PoolConfig(2, 1, max_wait_ms=7.5))
    try:
        workers, replicas = panel.children[0].children
        batch, wait = panel.children[1].children
        assert (workers.value, replicas.value, batch.value, wait.value) == (2, 1, 2, 7.5)
        seeded = bytes(panel.children[3].value)
        assert seeded.startswith(b"\x89PNG")  # the search's probes are plotted already
        panel.children[2].children[0].click()
        after = bytes(panel.children[3].value)
        assert after.startswith(b"\x89PNG") and after != seeded
        history = panel.session.history
        assert list(history["source"]) == ["search", "manual"]
        assert history.iloc[1]["workers"] == 2 and history.iloc[1]["probe"] == 1
    finally:
        panel.session.close()


# --- the annotator panel: two videos, A / B / invalid, durable and resumable ----------

import json  # noqa: E402

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


def test_annotator_shows_a_text_line_where_there_is_no_video(tmp_path):
    _, pairs, _ = annotation_pairs(tmp_path, videos=False)
    panel = annotator_panel(pairs, tmp_path / "ana.jsonl", "ana")
    texts, videos = displayed(panel)
    assert videos == [] and texts.count(NO_VIDEO) == 2
    buttons(panel)["A"].click()
    assert panel.children[0].value == "1 / 12 answered"
