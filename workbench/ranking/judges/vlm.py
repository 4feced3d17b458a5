"""VLM judge over the OpenAI-compatible chat-completions API (vLLM, SGLang, Ollama).

R2S-Eval's two steps (appendix D.1): (1) describe each video along four dimensions
from the whole video sampled at 10 FPS, given only the task name; (2) compare two
descriptions and answer exactly "A" or "B". An invalid answer is asked once more, then
recorded as invalid (the sampler draws a replacement comparison). Descriptions are
cached per video file and content, so each video is described once however many
comparisons use it.

At scale: :meth:`VLMJudge.compare_many` sends up to ``concurrency`` requests at once
(each distinct video described once, then the comparisons); a transport error (no
connection, a timeout, HTTP 429 or 5xx) is retried up to ``retries`` times with
exponential backoff, and an answer never is (an invalid one is re-asked once, as the
paper does). ``stats`` counts requests, retries, tokens and the frames of every
describe request.

Only the standard library speaks HTTP here (``urllib.request`` and ``json``). The API
key is read from the environment variable named in the config, and may be absent for a
local server.

>>> cfg = VLMConfig(base_url="http://127.0.0.1:8000/v1", model="Qwen3-VL-8B")
>>> VLMJudge(cfg).endpoint
'http://127.0.0.1:8000/v1/chat/completions'
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from workbench.errors import WorkbenchError
from workbench.ranking.judges.base import JudgeStats, Preference, RolloutRef, parse_choice
from workbench.ranking.judges.prompts import description_prompt, preference_prompt
from workbench.ranking.judges.video import file_digest, frame_data_url, read_frames


class VLMError(WorkbenchError, RuntimeError):
    """The server failed or answered something that is not a chat completion."""


class _Transport(VLMError):
    """A failure of the transport (connection, timeout, 429, 5xx): worth retrying."""


RETRY_HTTP = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class VLMConfig:
    """Where and how to ask. Defaults follow R2S-Eval Table VII.

    base_url: the API root including ``/v1``; api_key_env: name of the variable holding
    the key (unset is fine for local servers); fps: frames per second sampled from each
    video, the whole video by default; max_frames: an optional cap after sampling
    (servers may limit images per request, e.g. vLLM's ``--limit-mm-per-prompt``);
    concurrency: requests in flight at once in :meth:`VLMJudge.compare_many`; retries
    and backoff_s: transport-error retries, waiting ``backoff_s * 2**k`` before the k-th.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    fps: float = 10.0
    max_frames: int | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = 300.0
    image_format: str = "jpeg"
    concurrency: int = 4
    retries: int = 3
    backoff_s: float = 0.5

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://; got {self.base_url!r}")
        if self.fps <= 0 or (self.max_frames is not None and self.max_frames < 1) \
                or self.max_tokens < 1 or self.concurrency < 1:
            raise ValueError("fps, max_frames, max_tokens and concurrency must be positive")
        if self.retries < 0 or self.backoff_s < 0:
            raise ValueError(f"retries and backoff_s: expected >= 0; got {self.retries}, "
                             f"{self.backoff_s}")
        if self.image_format not in ("jpeg", "png"):
            raise ValueError(f"image_format: expected 'jpeg' or 'png'; got {self.image_format!r}")


class VLMJudge:
    """Two-step VLM preference judge; see the module docstring. Counts in ``stats``."""

    description = ("VLM judge: describes each rollout video along four dimensions, then "
                   "compares the two descriptions and answers A or B (R2S-Eval, appendix D.1)")

    def __init__(self, config: VLMConfig, name: str | None = None) -> None:
        self.config = config
        self.name = name or config.model
        self.stats = JudgeStats()
        self._descriptions: dict[tuple[str, str, str], str] = {}
        self._digests: dict[str, tuple[int, int, str]] = {}
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """The chat-completions URL."""
        return self.config.base_url.rstrip("/") + "/chat/completions"

    def chat(self, content: str | list[dict[str, Any]]) -> str:
        """Send one user message; return the answer text and count tokens and latency."""
        body = {"model": self.config.model, "messages": [{"role": "user", "content": content}],
                "temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        start = time.perf_counter()
        payload = self._post(body)
        elapsed = time.perf_counter() - start
        usage = payload.get("usage") or {}
        with self._lock:
            self.stats.requests += 1
            self.stats.latency_s += elapsed
            self.stats.latencies.append(elapsed)
            self.stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.stats.completion_tokens += int(usage.get("completion_tokens") or 0)
        try:
            return str(payload["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError) as err:
            raise VLMError(f"{self.endpoint}: not a chat completion: {str(payload)[:300]}") from err

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST with retries on transport errors only (backoff doubling each time)."""
        for attempt in range(self.config.retries + 1):
            try:
                return self._post_once(body)
            except _Transport as err:
                if attempt == self.config.retries:
                    raise VLMError(f"{err} (after {attempt} retries)") from err
                with self._lock:
                    self.stats.transport_retries += 1
                time.sleep(self.config.backoff_s * 2 ** attempt)
        raise AssertionError("unreachable")

    def _post_once(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.config.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.endpoint, data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                data = response.read()
        except urllib.error.HTTPError as err:
            detail = err.read()[:300].decode(errors="replace")
            kind = _Transport if err.code in RETRY_HTTP else VLMError
            raise kind(f"{self.endpoint}: HTTP {err.code}: {detail}") from err
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            raise _Transport(f"{self.endpoint}: {err}") from err
        try:
            return json.loads(data)
        except json.JSONDecodeError as err:  # an answer, not a transport failure
            raise VLMError(f"{self.endpoint}: not JSON: {data[:300]!r}") from err

    def describe(self, video: str | os.PathLike, task: str) -> str:
        """The four-dimension description of one video (cached by path, content, task)."""
        key = (str(Path(video).resolve()), self._digest(video), task)
        with self._lock:
            if key in self._descriptions:
                self.stats.cache_hits += 1
                return self._descriptions[key]
        frames = read_frames(video, self.config.fps, self.config.max_frames)
        parts: list[dict[str, Any]] = [{"type": "text", "text": description_prompt(task)}]
        parts += [{"type": "image_url",
                   "image_url": {"url": frame_data_url(f, self.config.image_format)}}
                  for f in frames]
        with self._lock:
            self.stats.describe_calls += 1
            self.stats.frames_per_request.append(len(frames))
        text = self.chat(parts).strip()
        with self._lock:
            self._descriptions[key] = text
        return text

    def _digest(self, video: str | os.PathLike) -> str:
        path = str(Path(video).resolve())
        info = os.stat(path)
        with self._lock:
            cached = self._digests.get(path)
        if cached is None or cached[:2] != (info.st_mtime_ns, info.st_size):
            cached = (info.st_mtime_ns, info.st_size, file_digest(path))
            with self._lock:
                self._digests[path] = cached
        return cached[2]

    def compare_many(self, requests: Sequence[tuple[RolloutRef, RolloutRef, str]]
                     ) -> list[Preference]:
        """:meth:`compare` for every ``(a, b, task)``, up to ``concurrency`` requests at
        once: each distinct (video, task) is described once first, then the
        comparisons run. Answers come back in the order of ``requests``."""
        for a, b, _ in requests:
            if a.video is None or b.video is None:
                raise ValueError("VLMJudge needs a video for both rollouts")
        videos = dict.fromkeys((r.video, task) for a, b, task in requests for r in (a, b))
        with ThreadPoolExecutor(self.config.concurrency) as pool:
            list(pool.map(lambda item: self.describe(*item), videos))
            return list(pool.map(lambda item: self.compare(*item), requests))

    def compare(self, a: RolloutRef, b: RolloutRef, task: str) -> Preference:
        """Describe both videos (cached), then ask for A or B; re-ask once if invalid."""
        if a.video is None or b.video is None:
            raise ValueError("VLMJudge needs a video for both rollouts")
        desc_a, desc_b = self.describe(a.video, task), self.describe(b.video, task)
        prompt = preference_prompt(desc_a, desc_b)
        answer, winner = "", None
        for attempt in (1, 2):
            with self._lock:
                self.stats.compare_calls += 1
            answer = self.chat(prompt)
            winner = parse_choice(answer)
            if winner is not None:
                break
            with self._lock:
                self.stats.invalid_answers += 1
        return Preference(winner=winner, raw=answer, description_a=desc_a,
                          description_b=desc_b, attempts=attempt)
