"""The workbench's own policy wire (``workbench.policy-server/v1``): what ``workbench
serve-policy --wire workbench`` and ``policy: remote`` speak.

- **Framing**: a WebSocket, one binary msgpack frame per message, arrays as openpi's
  typed dicts (:mod:`workbench.contracts.wire`: bytes keys ``b"__ndarray__"``,
  ``b"data"``, ``b"dtype"``, ``b"shape"``; only bool, int, uint and float).
- **Who speaks first**: the server, one frame of metadata (:func:`metadata`): ``server``
  (:data:`SERVER`), ``policy``, ``protocol``, ``features``, ``chunk_size``,
  ``privileged``, ``action`` (``dim``, ``dtype``, ``low``, ``high``), ``reset: true``,
  ``max_frame_bytes``, ``max_batch``.
- **Episode lifecycle**: ``{"reset": true, "episode_id", "task", "instruction", "seed"}``
  ends the connection's open episode, if any, and starts one; the server answers
  ``{"reset": true, "episode_id"}``. An observation with no episode open starts one
  (its ``task`` and ``instruction`` or ``prompt`` strings, when it has them). One
  connection holds at most one episode; closing it ends that episode.
- **Requests and replies**: an observation map (the policy's declared features, keyed by
  their canonical names) is answered by ``{"actions": (chunk, dim) float32,
  "server_timing": {"infer_ms", "batch"}}``.
- **Images**: uint8 (H, W, 3) arrays, as the benchmark rendered them.
- **Errors**: ``{"error": "<one line>", "blame": "policy" | "request" | "server"}``; the
  connection stays open. ``policy``: the policy raised or broke its action contract;
  ``request``: the frame was not a valid request; ``server``: the server failed (a
  policy call past its time limit among them).
- ``GET /healthz`` answers 200; ``GET /stats`` the server's counters as JSON.

>>> error_reply("bad request: a request must be a map", "request")["blame"]
'request'
"""

from __future__ import annotations

from typing import Any, Mapping

NAME = "workbench"
SERVER = "workbench.policy-server/v1"
BLAMES = ("policy", "request", "server")
HEALTH_PATH = "/healthz"
MAX_MESSAGE_CHARS = 500
"""Longest error text a reply carries."""


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters.

    >>> one_line("a\\nb  c", 4)
    'a b…'
    """
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def metadata(policy: str, protocol: str, features: list[str], chunk_size: int,
             privileged: bool, action: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """The metadata frame a server sends first (``extra``: more fields, e.g. limits)."""
    return {"server": SERVER, "policy": policy, "protocol": protocol, "features": features,
            "chunk_size": chunk_size, "privileged": privileged, "action": dict(action),
            "reset": True, **extra}


def reset_request(episode_id: str, task: str, instruction: str, seed: int) -> dict[str, Any]:
    """The frame that starts an episode on the connection."""
    return {"reset": True, "episode_id": episode_id, "task": task, "instruction": instruction,
            "seed": seed}


def error_reply(message: str, blame: str) -> dict[str, str]:
    """An error reply: the message on one line, and who is to blame."""
    if blame not in BLAMES:
        raise ValueError(f"blame: expected one of {list(BLAMES)}; got {blame!r}")
    return {"error": one_line(message), "blame": blame}
