"""VLMJudge end to end over real HTTP against the deterministic loopback server."""

import json
import shutil
import socket
import time

import imageio.v3 as iio
import numpy as np
import pytest

from workbench.ranking.judges.base import RolloutRef, parse_choice
from workbench.ranking.judges.loopback import serve_fake_vlm
from workbench.ranking.judges.prompts import description_prompt
from workbench.ranking.judges.vlm import VLMConfig, VLMError, VLMJudge

TASK = "Stack Blocks"
VIDEO_FPS, N_FRAMES = 30, 45  # 1.5 s; sampling at 10 FPS keeps 15 frames


def write_video(path, kind, success, seed=0):
    """A 64x64 clip of a square moving steadily (smooth) or jumping (jerky).

    Successful clips have a bright background: the fake server reads the outcome from it.
    """
    rng = np.random.default_rng(seed)
    frames = np.full((N_FRAMES, 64, 64, 3), 200 if success else 30, np.uint8)
    for t in range(N_FRAMES):
        x, y = (4 + t, 24) if kind == "smooth" else rng.integers(0, 48, 2)
        frames[t, y:y + 16, x:x + 16] = 30 if success else 220
    iio.imwrite(path, frames, fps=VIDEO_FPS)
    return str(path)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videos")
    return {name: RolloutRef(name, video=write_video(folder / f"pi0_{name}.mp4", *spec, seed=k))
            for k, (name, spec) in enumerate({"smooth_ok": ("smooth", True),
                                              "jerky_ok": ("jerky", True),
                                              "smooth_fail": ("smooth", False),
                                              "jerky_fail": ("jerky", False)}.items())}


def judge_for(fake, **kwargs):
    return VLMJudge(VLMConfig(base_url=fake.base_url, model="fake-vlm", **kwargs))


def test_two_step_flow_prefers_smooth_and_successful(videos):
    with serve_fake_vlm() as fake:
        judge = judge_for(fake)
        assert judge.compare(videos["smooth_ok"], videos["jerky_ok"], TASK).winner == "A"
        assert judge.compare(videos["jerky_ok"], videos["smooth_ok"], TASK).winner == "B"
        pref = judge.compare(videos["jerky_ok"], videos["smooth_fail"], TASK)
    assert pref.winner == "A"  # success outweighs smoothness in the fake's rule
    assert "jerky" in pref.description_a and "smooth and steady" in pref.description_b
    describes = [r for r in fake.requests if isinstance(r["messages"][0]["content"], list)]
    assert len(describes) == 3
    parts = describes[0]["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": description_prompt(TASK)}
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == N_FRAMES * 10 // VIDEO_FPS
    assert images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    compares = [r for r in fake.requests if isinstance(r["messages"][0]["content"], str)]
    assert "Robot A: Section 1: Motion Smoothness" in compares[0]["messages"][0]["content"]
    for body in fake.requests:
        assert body["temperature"] == 0 and body["max_tokens"] == 1024
        assert body["model"] == "fake-vlm"


def test_no_policy_identity_or_path_reaches_the_server(videos):
    with serve_fake_vlm() as fake:
        judge_for(fake).compare(videos["smooth_ok"], videos["jerky_fail"], TASK)
    sent = json.dumps(fake.requests)
    assert "pi0" not in sent and ".mp4" not in sent and "smooth_ok" not in sent


def test_each_video_described_once_and_cache_follows_content(videos, tmp_path):
    own = tmp_path / "own.mp4"  # a private copy: this test rewrites it
    shutil.copy(videos["smooth_ok"].video, own)
    videos = {**videos, "smooth_ok": RolloutRef("own", video=str(own))}
    with serve_fake_vlm() as fake:
        judge = judge_for(fake)
        for a, b in [("smooth_ok", "jerky_ok"), ("jerky_ok", "smooth_ok"),
                     ("smooth_ok", "smooth_fail"), ("smooth_fail", "jerky_ok")]:
            judge.compare(videos[a], videos[b], TASK)
        assert judge.stats.describe_calls == 3 and judge.stats.cache_hits == 5
        assert judge.stats.as_dict()["describe_calls"] == 3.0
        assert judge.stats.compare_calls == 4
        # same path, new content: described again
        write_video(videos["smooth_ok"].video, "jerky", True, seed=9)
        pref = judge.compare(videos["smooth_ok"], videos["smooth_fail"], TASK)
    assert judge.stats.describe_calls == 4
    assert "jerky" in pref.description_a


def test_max_frames_caps_uniformly(videos):
    with serve_fake_vlm() as fake:
        description = judge_for(fake, max_frames=4).describe(videos["smooth_ok"].video, TASK)
    parts = fake.requests[0]["messages"][0]["content"]
    assert sum(p["type"] == "image_url" for p in parts) == 4
    assert description.endswith("frames: 4")


def test_invalid_answer_is_asked_again_once(videos):
    with serve_fake_vlm("garbage_once") as fake:
        judge = judge_for(fake)
        pref = judge.compare(videos["smooth_ok"], videos["jerky_ok"], TASK)
    assert pref.winner == "A" and pref.attempts == 2
    assert judge.stats.compare_calls == 2 and judge.stats.invalid_answers == 1


def test_always_invalid_is_recorded_invalid_after_one_retry(videos):
    with serve_fake_vlm("always_garbage") as fake:
        judge = judge_for(fake)
        pref = judge.compare(videos["smooth_ok"], videos["jerky_ok"], TASK)
    assert pref.winner is None and not pref.valid and pref.attempts == 2
    assert judge.stats.compare_calls == 2 and judge.stats.invalid_answers == 2
    assert "Robot A did slightly better" in pref.raw


def test_token_and_latency_accounting(videos):
    with serve_fake_vlm() as fake:
        judge = judge_for(fake)
        judge.compare(videos["smooth_ok"], videos["jerky_ok"], TASK)
    texts = []
    for body in fake.requests:
        content = body["messages"][0]["content"]
        texts.append(content if isinstance(content, str) else content[0]["text"])
    images = 2 * (N_FRAMES * 10 // VIDEO_FPS)
    assert judge.stats.prompt_tokens == sum(len(t.split()) for t in texts) + 100 * images
    assert judge.stats.completion_tokens > 0
    assert judge.stats.latency_s > 0 and len(judge.stats.latencies) == 3


def test_api_key_from_named_environment_variable(videos, monkeypatch):
    monkeypatch.setenv("MY_VLM_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with serve_fake_vlm() as fake:
        judge_for(fake, api_key_env="MY_VLM_KEY").chat("hello")
        judge_for(fake).chat("hello")  # default variable unset: no header at all
    assert fake.headers[0]["Authorization"] == "Bearer sk-test"
    assert "Authorization" not in fake.headers[1]


def test_http_failures_raise_vlm_error():
    with serve_fake_vlm() as fake:
        wrong = VLMJudge(VLMConfig(base_url=fake.base_url + "/nope", model="m"))
        with pytest.raises(VLMError, match="HTTP 404"):
            wrong.chat("hi")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    closed = VLMJudge(VLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=5))
    with pytest.raises(VLMError):
        closed.chat("hi")


def test_config_validation_and_missing_video():
    with pytest.raises(ValueError, match="http"):
        VLMConfig(base_url="localhost:8000", model="m")
    with pytest.raises(ValueError, match="positive"):
        VLMConfig(base_url="http://x/v1", model="m", fps=0)
    judge = VLMJudge(VLMConfig(base_url="http://127.0.0.1:9/v1", model="m"))
    with pytest.raises(ValueError, match="needs a video"):
        judge.compare(RolloutRef("a"), RolloutRef("b"), TASK)


@pytest.mark.parametrize("text, expected", [
    ("A", "A"), (" B\n", "B"), ('"A"', "A"), ("'B'.", "B"), ("A.", "A"),
    ("a", None), ("A or B", None), ("Answer: A", None), ("", None), ("AB", None),
])
def test_parse_choice(text, expected):
    assert parse_choice(text) == expected


def pairs(videos):
    names = ["smooth_ok", "jerky_ok", "smooth_fail", "jerky_fail"]
    return [(videos[a], videos[b], TASK) for a in names for b in names if a < b]


def test_the_whole_video_goes_at_the_frame_rate_and_each_request_logs_its_frames(videos):
    with serve_fake_vlm() as fake:
        judge = judge_for(fake)
        judge.compare(videos["smooth_ok"], videos["jerky_fail"], TASK)
    assert judge.stats.frames_per_request == [N_FRAMES * 10 // VIDEO_FPS] * 2  # 15 each
    sent = [sum(p["type"] == "image_url" for p in r["messages"][0]["content"])
            for r in fake.requests if isinstance(r["messages"][0]["content"], list)]
    assert sent == judge.stats.frames_per_request
    assert judge.stats.as_dict()["frames_sent"] == 30


def test_a_slow_server_gets_at_most_concurrency_requests_at_once_and_answers_keep_order(
        videos):
    with serve_fake_vlm() as fake:
        expected = [judge_for(fake).compare(*r).winner for r in pairs(videos)]
    with serve_fake_vlm(delay_s=0.2) as slow:
        judge = judge_for(slow, concurrency=3)
        answers = judge.compare_many(pairs(videos))
    assert [a.winner for a in answers] == expected
    assert slow.max_in_flight == 3  # 4 videos described at once would be 4
    assert judge.stats.describe_calls == 4 and judge.stats.compare_calls == len(expected)
    assert judge.stats.requests == len(slow.requests) == 4 + len(expected)


def test_transport_failures_are_retried_with_backoff_and_answers_are_not(videos):
    with serve_fake_vlm() as fake:
        expected = [judge_for(fake).compare(*r).winner for r in pairs(videos)]
    with serve_fake_vlm(fail_every=3) as failing:
        judge = judge_for(failing, concurrency=2, backoff_s=0.01)
        answers = judge.compare_many(pairs(videos))
    assert [a.winner for a in answers] == expected  # every failed request was retried
    assert failing.failures > 0 and judge.stats.transport_retries == failing.failures
    assert judge.stats.requests == len(failing.requests)  # answered requests, counted once
    with serve_fake_vlm("garbage_once") as garbage:  # an invalid answer: asked again once,
        judge = judge_for(garbage)                     # by the paper's rule, not retried
        assert judge.compare(videos["smooth_ok"], videos["jerky_ok"], TASK).attempts == 2
    assert judge.stats.transport_retries == 0


def test_retries_stop_after_the_configured_count_with_growing_waits(videos):
    with serve_fake_vlm(fail_every=1) as down:
        judge = judge_for(down, retries=2, backoff_s=0.05)
        start = time.perf_counter()
        with pytest.raises(VLMError, match=r"HTTP 503.*after 2 retries"):
            judge.describe(videos["smooth_ok"].video, TASK)
        waited = time.perf_counter() - start
    assert down.arrivals == 3 and judge.stats.transport_retries == 2
    assert waited >= 0.05 + 0.10  # backoff_s, then twice it
    with pytest.raises(ValueError, match="concurrency must be positive"):
        VLMConfig(base_url="http://127.0.0.1:1/v1", model="m", concurrency=0)


def test_the_pipeline_asks_the_vlm_concurrently_and_gets_the_sequential_answers(videos):
    import pandas as pd

    from workbench.studies.judging import judge_comparisons
    from workbench.ranking.sampling import sample_comparisons

    table = pd.DataFrame([("p", TASK, 0, "r0", videos["smooth_ok"].video),
                          ("p", TASK, 1, "r1", videos["smooth_fail"].video),
                          ("q", TASK, 0, "r2", videos["jerky_ok"].video),
                          ("q", TASK, 1, "r3", videos["jerky_fail"].video)],
                         columns=["policy", "task", "init_id", "rollout_id", "video"])
    comparisons = sample_comparisons(table, 6, seed=0)
    with serve_fake_vlm(delay_s=0.1) as slow:
        one = judge_comparisons(comparisons, table, judge_for(slow, concurrency=1))
        assert slow.max_in_flight == 1
        many = judge_comparisons(comparisons, table, judge_for(slow, concurrency=3))
    assert slow.max_in_flight == 3
    assert many["winner"].tolist() == one["winner"].tolist()
    assert many["winner_policy"].eq("p").all()  # smooth beats jerky at every init


def test_requests_tokens_and_retries_land_in_the_run_records(videos, tmp_path):
    import pandas as pd

    from workbench.studies.judging import judge_comparisons
    from workbench.ranking.sampling import sample_comparisons
    from workbench.records.store import RecordStore

    table = pd.DataFrame([("p", TASK, 0, "r0", videos["smooth_ok"].video),
                          ("q", TASK, 0, "r2", videos["jerky_ok"].video)],
                         columns=["policy", "task", "init_id", "rollout_id", "video"])
    comparisons = sample_comparisons(table, 4, seed=0)
    records = tmp_path / "records.sqlite"
    with serve_fake_vlm(fail_every=3) as failing:
        judge = judge_for(failing, concurrency=2, backoff_s=0.01)
        judge_comparisons(comparisons, table, judge, records=records, label="vlm-run")
    stored = RecordStore(records).judge_stats("vlm-run")
    assert len(stored) == 1 and stored.loc[0, "judge"] == judge.name
    row = stored.iloc[0]
    assert row["requests"] == len(failing.requests) == 2 + 4  # 2 descriptions, 4 comparisons
    assert row["transport_retries"] == failing.failures > 0
    assert row["prompt_tokens"] == judge.stats.prompt_tokens > 0
    assert row["completion_tokens"] == judge.stats.completion_tokens > 0
    assert row["frames_per_request"] == judge.stats.frames_per_request == [15, 15]
    assert RecordStore(records).judge_stats("another").empty
