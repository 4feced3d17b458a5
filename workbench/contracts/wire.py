"""Frames on the wire: msgpack maps, numpy arrays as typed dicts, never pickle.

Both network boundaries of the workbench speak this encoding: the SIM service
(``workbench.sim-server/v1``) and the openpi-style policy server. An array travels as
openpi's ``msgpack_numpy`` does, a map ``{"__ndarray__": True, "data": bytes,
"dtype": "<f4", "shape": [..]}``, so openpi clients and servers read our frames
unchanged. Only bool, signed and unsigned integer and floating dtypes are accepted
(:data:`ALLOWED_KINDS`); object, void, complex and string arrays are refused on both
ends. Decoding checks that the byte count matches dtype and shape.

>>> frame = encode({"state": np.arange(3, dtype=np.float32), "step": 2})
>>> decoded = decode(frame)
>>> decoded["state"].dtype, decoded["state"].tolist(), decoded["step"]
(dtype('float32'), [0.0, 1.0, 2.0], 2)
>>> decode(b"\\xc1")
Traceback (most recent call last):
...
workbench.contracts.wire.WireError: malformed frame: not msgpack (FormatError)
"""

from __future__ import annotations

from typing import Any, Callable

import msgpack
import numpy as np

from workbench.errors import WorkbenchError

ALLOWED_KINDS = frozenset("biuf")
"""numpy dtype kinds that may cross the wire: bool, int, uint, float."""
MAX_FRAME_BYTES = 8 * 1024 * 1024
"""Default largest frame either end accepts (8 MiB: a few 256x256 cameras fit)."""
_ND, _GENERIC = "__ndarray__", "__npgeneric__"


class WireError(WorkbenchError, ValueError):
    """A frame that cannot be decoded, or a value that may not be encoded."""


def _check_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind not in ALLOWED_KINDS:
        raise WireError(f"dtype {dtype.str!r} may not cross the wire; "
                        "allowed: bool, int, uint and float arrays")
    return dtype


def _pack(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        return {_ND.encode(): True, b"data": np.ascontiguousarray(obj).tobytes(),
                b"dtype": obj.dtype.str, b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return {_GENERIC.encode(): True, b"data": obj.item(), b"dtype": obj.dtype.str}
    if isinstance(obj, tuple):
        return list(obj)
    raise WireError(f"a {type(obj).__name__} may not cross the wire")


def encode(message: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """``message`` as one msgpack frame (arrays as typed dicts). default: a hook tried
    first for every value msgpack cannot pack (returning NotImplemented passes it on)."""
    def pack(obj: Any) -> Any:
        if default is not None:
            packed = default(obj)
            if packed is not NotImplemented:
                return packed
        return _pack(obj)

    try:
        return msgpack.packb(message, default=pack, use_bin_type=True)
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireError(f"cannot encode: {exc}") from None


def _key(d: dict, name: str) -> Any:
    return d.get(name, d.get(name.encode()))


def unpack_array(d: dict) -> Any:
    """A typed dict read back (an array or a numpy scalar), checked; any other map with
    its bytes keys as strings. Raises :class:`WireError` for a malformed one."""
    if _key(d, _ND) is True:
        data, dtype, shape = _key(d, "data"), _key(d, "dtype"), _key(d, "shape")
        if not isinstance(data, bytes) or not isinstance(dtype, str) or \
                not isinstance(shape, (list, tuple)) or \
                not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in shape):
            raise WireError("malformed array: needs bytes data, a dtype string and a shape "
                            "of non-negative integers")
        try:
            kind = np.dtype(dtype)
        except TypeError:
            raise WireError(f"malformed array: unknown dtype {dtype!r}") from None
        _check_dtype(kind)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count * kind.itemsize != len(data):
            raise WireError(f"malformed array: {len(data)} bytes do not hold shape "
                            f"{tuple(shape)} of {kind.str}")
        return np.frombuffer(data, dtype=kind).reshape(shape).copy()
    if _key(d, _GENERIC) is True:
        dtype = _key(d, "dtype")
        try:
            kind = _check_dtype(np.dtype(dtype))
            return kind.type(_key(d, "data"))
        except (TypeError, ValueError) as exc:
            raise WireError(f"malformed scalar: {exc}") from None
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in d.items()}


def _hooked(hook: Callable[[dict], Any] | None) -> Callable[[dict], Any]:
    if hook is None:
        return unpack_array

    def unpack(d: dict) -> Any:
        value = hook(d)
        return unpack_array(d) if value is NotImplemented else value
    return unpack


def decode(frame: bytes, max_bytes: int = MAX_FRAME_BYTES,
           hook: Callable[[dict], Any] | None = None) -> Any:
    """The message in ``frame``; raises :class:`WireError` for anything malformed.
    hook: tried first on every map (returning NotImplemented passes it on), for a
    wire's own typed dicts (vla-eval's images)."""
    if not isinstance(frame, (bytes, bytearray)):
        raise WireError("malformed frame: expected a binary msgpack frame; got text")
    if len(frame) > max_bytes:
        raise WireError(f"frame of {len(frame)} bytes exceeds the limit of {max_bytes}")
    try:
        return msgpack.unpackb(bytes(frame), object_hook=_hooked(hook), raw=False,
                               strict_map_key=False)
    except WireError:
        raise
    except Exception as exc:  # msgpack raises several types for garbage
        raise WireError(f"malformed frame: not msgpack ({type(exc).__name__}"
                        + (f": {exc})" if str(exc) else ")")) from None
