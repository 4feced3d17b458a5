"""vla-eval's wire, as vla-eval 0.8.0 speaks it between a benchmark runner and a model
server.

The sources: vla-eval's ``vla_eval.protocol`` (``messages``, ``numpy_codec``,
``image_codec``), ``vla_eval.connection`` (the runner's client) and
``vla_eval.model_servers.serve`` (the server loop).

- **Framing**: a WebSocket, one binary msgpack frame per message, each an *envelope*
  ``{"type", "payload", "seq", "timestamp"}`` with ``type`` one of :data:`TYPES`,
  ``payload`` a map, ``seq`` an integer the client counts up from 1 and ``timestamp``
  seconds since the epoch. Arrays travel with *str* keys: ``{"__ndarray__": True,
  "data", "dtype", "shape"}``.
- **Who speaks first**: the client (the benchmark runner): ``hello`` with
  ``{"harness_version", "protocol_version": 1, ...}``; the server answers ``hello``
  with its own (``model_server``, ``capabilities``, and optionally
  ``observation_params``, ``action_spec`` and ``observation_spec``).
- **Episode lifecycle**: ``episode_start`` (payload ``{"task": {...}}``: the task's
  plain fields, ``name`` among them), then one ``observation`` per step, each answered
  by one ``action`` carrying the observation's ``seq`` and ``{"actions": (dim,)}``
  (a server that keeps action chunks hands them out one per observation), then
  ``episode_end`` (``{"metrics": ..., "steps": ...}``, no reply).
- **Images**: HWC uint8 arrays of 1, 3 or 4 channels go as ``{"__image__": True,
  "format": "png"|"jpeg"|"raw", "data", "shape"}`` (``raw`` also has ``dtype``); PNG
  is vla-eval's default.
- **Errors**: the server answers a failed observation with ``error``
  ``{"error": "observation_failed: <Type>: <message>"}`` (the observation's ``seq``) and
  keeps the connection.
- ``GET /health`` answers 200 ``{"status": "ok"}``.

>>> frame = encode(envelope("observation", {"images": {"primary": np.zeros((4, 4, 3),
...                                                                         np.uint8)}}, 3))
>>> message = decode(frame)
>>> message["type"], message["seq"], message["payload"]["images"]["primary"].shape
('observation', 3, (4, 4, 3))
>>> decode(encode({"type": "shout", "payload": {}, "seq": 1, "timestamp": 0.0}))
Traceback (most recent call last):
...
workbench.contracts.wire.WireError: unknown message type 'shout'; known: ['action', 'episode_end', 'episode_start', 'error', 'hello', 'observation']
"""

from __future__ import annotations

import io
import time
from typing import Any, Literal

import numpy as np

from workbench.contracts.wire import (ALLOWED_KINDS, MAX_FRAME_BYTES, WireError, decode as _decode,
                                      encode as _encode)

NAME = "vla-eval"
TYPES = ("hello", "observation", "action", "episode_start", "episode_end", "error")
PROTOCOL_VERSION = 1
HARNESS_VERSION = "0.8.0"
"""The vla-eval release whose wire this module speaks (sent in our hello)."""
HEALTH_PATH = "/health"
ImageFormat = Literal["png", "raw"]
_IMAGE = "__image__"
MAX_IMAGE_BYTES = 64 * 2**20
"""Largest decoded image accepted (a compressed frame may claim far more than it holds)."""


def envelope(kind: str, payload: dict[str, Any], seq: int) -> dict[str, Any]:
    """A message of ``kind`` (one of :data:`TYPES`)."""
    if kind not in TYPES:
        raise WireError(f"unknown message type {kind!r}; known: {sorted(TYPES)}")
    return {"type": kind, "payload": payload, "seq": seq, "timestamp": time.time()}


def hello_payload(**extra: Any) -> dict[str, Any]:
    """The common fields of a hello, plus ``extra``."""
    return {"harness_version": HARNESS_VERSION, "protocol_version": PROTOCOL_VERSION, **extra}


def encode(message: dict[str, Any], image_format: ImageFormat = "png") -> bytes:
    """One frame: images as ``__image__`` maps (``image_format``), other arrays as
    ``__ndarray__`` maps with str keys, numpy scalars as plain numbers."""
    return _encode(message, default=lambda obj: _pack(obj, image_format))


def _pack(obj: Any, image_format: ImageFormat) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in ALLOWED_KINDS:
            raise WireError(f"dtype {obj.dtype.str!r} may not cross the wire")
        if obj.ndim == 3 and obj.dtype == np.uint8 and obj.shape[2] in (1, 3, 4):
            return _image(obj, image_format)
        return {"__ndarray__": True, "data": np.ascontiguousarray(obj).tobytes(),
                "dtype": obj.dtype.str, "shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return obj.item()
    return NotImplemented


def _image(image: np.ndarray, image_format: ImageFormat) -> dict[str, Any]:
    if image_format == "raw":
        return {_IMAGE: True, "format": "raw", "data": np.ascontiguousarray(image).tobytes(),
                "dtype": image.dtype.str, "shape": list(image.shape)}
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(image[..., 0] if image.shape[2] == 1 else image).save(out, format="PNG")
    return {_IMAGE: True, "format": "png", "data": out.getvalue(), "shape": list(image.shape)}


def decode(frame: bytes, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """The envelope in ``frame``, images decoded; raises WireError for a frame that is
    not a well-formed envelope of a known type."""
    message = _decode(frame, max_bytes, hook=_unpack_image)
    if not isinstance(message, dict):
        raise WireError(f"a message: expected a map; got {type(message).__name__}")
    missing = [k for k in ("type", "payload", "seq", "timestamp") if k not in message]
    if missing:
        raise WireError(f"a message needs type, payload, seq and timestamp; missing {missing}")
    if message["type"] not in TYPES:
        raise WireError(f"unknown message type {message['type']!r}; known: {sorted(TYPES)}")
    if not isinstance(message["payload"], dict):
        raise WireError(f"payload: expected a map; got {type(message['payload']).__name__}")
    if not isinstance(message["seq"], int) or isinstance(message["seq"], bool):
        raise WireError(f"seq: expected an integer; got {message['seq']!r}")
    return message


def _unpack_image(d: dict) -> Any:
    if d.get(_IMAGE) is not True:
        return NotImplemented
    shape = d.get("shape")
    if not isinstance(shape, list) or len(shape) != 3 or \
            not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
        raise WireError("malformed image: needs a shape of three positive sizes")
    if int(np.prod(shape, dtype=np.int64)) > MAX_IMAGE_BYTES:
        raise WireError(f"image of shape {tuple(shape)} exceeds {MAX_IMAGE_BYTES} bytes")
    data, kind = d.get("data"), d.get("format")
    if not isinstance(data, bytes):
        raise WireError("malformed image: needs bytes data")
    if kind == "raw":
        if d.get("dtype") != "|u1" or len(data) != int(np.prod(shape)):
            raise WireError(f"malformed raw image: {len(data)} bytes of {d.get('dtype')!r} do "
                            f"not hold uint8 {tuple(shape)}")
        return np.frombuffer(data, np.uint8).reshape(shape).copy()
    if kind not in ("png", "jpeg"):
        raise WireError(f"malformed image: unknown format {kind!r}")
    return _decoded_picture(data, kind, tuple(shape))


def _decoded_picture(data: bytes, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as picture:
            if (picture.height, picture.width) != shape[:2]:
                raise WireError(f"malformed {kind} image: {picture.height}x{picture.width}, "
                                f"not the {shape[0]}x{shape[1]} its shape says")
            array = np.asarray(picture.convert({1: "L", 3: "RGB", 4: "RGBA"}[shape[2]]))
    except WireError:
        raise
    except Exception as exc:  # PIL raises several types for damaged data
        raise WireError(f"malformed {kind} image ({type(exc).__name__})") from None
    return array.reshape(shape)
