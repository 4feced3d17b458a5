"""A deterministic fake chat-completions server on 127.0.0.1, for tests and demos.

This is NOT a judge and knows nothing of robots: it lets :class:`VLMJudge` be exercised
end to end over real HTTP without a model. Its rules are fixed and simple:

* describe (a message with ``image_url`` parts): decodes the frames; the description
  says "smooth and steady" when the mean absolute change between consecutive frames is
  below ``MOTION_THRESHOLD`` grey levels, else "jerky"; the outcome is "successful" when
  the last frame's mean brightness is above 127, else "failed"; it ends with
  ``frames: N``, the number of images received.
* compare (text only): scores each description (+1 smooth, +2 successful) and answers
  the higher, "A" on a tie.
* mode "garbage_once" answers the first request of each distinct compare prompt with
  prose (an invalid answer), the repeat properly; "always_garbage" never answers A/B.
* ``delay_s`` makes every answer wait that long (a slow server; requests are served in
  parallel threads, and ``max_in_flight`` records the most served at once);
  ``fail_every`` answers every n-th request (counting from the first) with HTTP 503
  before reading its prompt (a failing server; ``failures`` counts them).

Usage counts are words (+100 per image for prompts), so token accounting is testable.

>>> import json, urllib.request
>>> with serve_fake_vlm() as fake:
...     body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
...     req = urllib.request.Request(fake.base_url + "/chat/completions",
...                                  data=json.dumps(body).encode(), method="POST")
...     reply = json.loads(urllib.request.urlopen(req).read())
>>> reply["choices"][0]["message"]["content"], len(fake.requests)
('A', 1)
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import numpy as np

MOTION_THRESHOLD = 15.0
MODES = ("normal", "garbage_once", "always_garbage")
GARBAGE = "Both robots are fine, but I think Robot A did slightly better overall."


@dataclass
class FakeVLM:
    """The running fake: its ``base_url`` (ending in /v1), every request body received
    and each request's headers."""

    base_url: str
    mode: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    seen_prompts: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    delay_s: float = 0.0
    fail_every: int = 0
    arrivals: int = 0
    failures: int = 0
    in_flight: int = 0
    max_in_flight: int = 0

    def admit(self) -> bool:
        """Count an arriving request; False when this one is to fail (``fail_every``)."""
        with self.lock:
            self.arrivals += 1
            if self.fail_every and self.arrivals % self.fail_every == 0:
                self.failures += 1
                return False
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return True

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def reply(self, body: dict[str, Any]) -> tuple[str, int]:
        """The answer text and the prompt token count for one request body."""
        with self.lock:
            self.requests.append(body)
        content = body["messages"][-1]["content"]
        if isinstance(content, list):
            texts = [p["text"] for p in content if p.get("type") == "text"]
            urls = [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
            return describe_frames([_decode(u) for u in urls]), _words(texts) + 100 * len(urls)
        return self._answer(str(content)), _words([str(content)])

    def _answer(self, prompt: str) -> str:
        if self.mode == "always_garbage":
            return GARBAGE
        if self.mode == "garbage_once":
            key = hashlib.sha256(prompt.encode()).hexdigest()
            with self.lock:
                first = key not in self.seen_prompts
                self.seen_prompts.add(key)
            if first:
                return GARBAGE
        return compare_descriptions(prompt)


def _words(texts: list[str]) -> int:
    return sum(len(t.split()) for t in texts)


def _decode(url: str) -> np.ndarray:
    import imageio.v3 as iio

    header, data = url.split(",", 1)
    ext = ".png" if "png" in header else ".jpeg"
    frame = iio.imread(base64.b64decode(data), extension=ext)
    return frame.mean(axis=-1) if frame.ndim == 3 else frame


def describe_frames(frames: list[np.ndarray]) -> str:
    """The fake description of grey frames (see the module rules)."""
    stack = np.stack(frames).astype(np.float64) if frames else np.zeros((1, 1, 1))
    motion = float(np.abs(np.diff(stack, axis=0)).mean()) if len(stack) > 1 else 0.0
    smooth = motion < MOTION_THRESHOLD
    success = stack[-1].mean() > 127
    return "\n".join([
        "Section 1: Motion Smoothness",
        "The motion is smooth and steady." if smooth else "The motion is jerky with visible jitter.",
        "Section 2: Action Continuity",
        "Transitions flow naturally." if smooth else "Transitions are abrupt.",
        "Section 3: Task Success",
        f"Final outcome: {'successful' if success else 'failed'}.",
        "Section 4: Force / Effort Control",
        "Force appears appropriate.",
        "Section 5: Short Overall Summary",
        f"motion={motion:.1f} frames: {len(frames)}",
    ])


def _score(description: str) -> int:
    return int("smooth and steady" in description) + 2 * int("outcome: successful" in description)


def compare_descriptions(prompt: str) -> str:
    """'A' or 'B' by the fake scoring rule on the two descriptions in a preference prompt."""
    match = re.search(r"Robot A: (.*?)\n\nRobot B: (.*?)\n\nYour goal", prompt, re.S)
    if match is None:
        return "A"
    return "B" if _score(match.group(2)) > _score(match.group(1)) else "A"


def _handler(fake: FakeVLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": f"no route {self.path}"})
                return
            with fake.lock:
                fake.headers.append(dict(self.headers.items()))
            data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if not fake.admit():
                self._send(503, {"error": "overloaded (fail_every)"})
                return
            try:
                time.sleep(fake.delay_s)
                body = json.loads(data)
                text, prompt_tokens = fake.reply(body)
            except (ValueError, KeyError, TypeError) as err:
                self._send(400, {"error": str(err)})
                return
            finally:
                fake.leave()
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                     "total_tokens": prompt_tokens + len(text.split())}
            self._send(200, {"id": "fake", "object": "chat.completion", "model": body.get("model"),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": text}}],
                             "usage": usage})

        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    return Handler


@contextmanager
def serve_fake_vlm(mode: str = "normal", delay_s: float = 0.0, fail_every: int = 0
                   ) -> Iterator[FakeVLM]:
    """Run the fake server on a free loopback port for the duration of a ``with`` block
    (``delay_s``, ``fail_every``: a slow or failing server, see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; available: {list(MODES)}")
    fake = FakeVLM(base_url="", mode=mode, delay_s=delay_s, fail_every=fail_every)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
