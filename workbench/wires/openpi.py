"""openpi's policy wire, as openpi-client 0.1.2 and openpi's server speak it.

The sources: openpi-client's ``websocket_client_policy`` and ``msgpack_numpy``, and the
server in openpi's repository, ``src/openpi/serving/websocket_policy_server.py``
(published unchanged on PyPI as ``openpi-server``).

- **Framing**: a WebSocket, one binary frame per message, msgpack. Arrays travel as
  openpi-client's ``msgpack_numpy`` writes them: a map with *bytes* keys
  ``b"__ndarray__": True``, ``b"data"`` (the raw buffer), ``b"dtype"`` (numpy's
  ``dtype.str``, e.g. ``"<f4"``), ``b"shape"``; numpy scalars as ``b"__npgeneric__"``
  maps. :mod:`workbench.contracts.wire` writes the same and reads both bytes and str
  keys.
- **Who speaks first**: the server. On connecting, the client receives one frame holding
  the server's metadata map (any content; openpi's servers often send ``{}``).
- **Requests and replies**: each client frame is one observation map (the keys the
  model's input transforms expect, e.g. ``observation/image``, ``prompt``); each reply
  is one map holding ``"actions"``, a ``(chunk, dim)`` array, and ``"server_timing"``
  (``{"infer_ms": ..}``).
- **Episode lifecycle**: none on the wire. A client's ``reset()`` is local, and openpi's
  LIBERO example keeps one connection for all its episodes.
- **Images**: uint8 arrays, preprocessed by the client (resized with padding to 224,
  channels-last for LIBERO, channels-first for ALOHA): see :mod:`.presets`.
- **Errors**: when ``infer`` raises, the server sends the traceback as a *text* frame
  and closes the connection with code 1011 (internal error). openpi-client raises on
  any text frame.
- ``GET /healthz`` answers 200.

>>> reply = actions_reply(np.zeros((2, 7), np.float32), 1.5)
>>> read_actions(decode(encode(reply))).shape
(2, 7)
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np

from workbench.contracts.wire import MAX_FRAME_BYTES, decode as _decode, encode as _encode
from workbench.wires.replies import read_actions

__all__ = ["CLOSE_INTERNAL_ERROR", "HEALTH_PATH", "NAME", "actions_reply", "decode", "encode",
           "error_text", "read_actions"]

NAME = "openpi"
CLOSE_INTERNAL_ERROR = 1011
"""The close code an openpi server sends after its error frame."""
HEALTH_PATH = "/healthz"


def encode(message: Any) -> bytes:
    """One frame, arrays in msgpack_numpy's form."""
    return _encode(message)


def decode(frame: bytes, max_bytes: int = MAX_FRAME_BYTES) -> Any:
    """The message in a binary frame; raises WireError for anything malformed."""
    return _decode(frame, max_bytes)


def actions_reply(actions: np.ndarray, infer_ms: float) -> dict[str, Any]:
    """A server's reply: the ``(chunk, dim)`` float32 actions and their timing."""
    return {"actions": np.ascontiguousarray(np.atleast_2d(actions), np.float32),
            "server_timing": {"infer_ms": float(infer_ms)}}


def error_text(exc: BaseException) -> str:
    """The text frame an openpi server sends when inference raised: a traceback header
    and the exception's own lines (the frames of this server are left out)."""
    return ("Traceback (most recent call last):\n  (in the policy server)\n"
            + "".join(traceback.format_exception_only(type(exc), exc)))
