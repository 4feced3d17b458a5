"""What a policy server's reply must hold to be acted on, whatever the wire.

>>> read_actions({"actions": np.zeros(7, np.float32)}).shape
(1, 7)
>>> read_actions({"server_timing": {}})
Traceback (most recent call last):
...
workbench.wires.replies.ReplyError: the reply holds no "actions" (keys: ['server_timing'])
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from workbench.errors import WorkbenchError


class ReplyError(WorkbenchError, ValueError):
    """A reply that does not hold a usable action chunk (what came back is named)."""


def read_actions(reply: Any) -> np.ndarray:
    """The ``(chunk, dim)`` actions of a decoded reply map; raises :class:`ReplyError`
    naming what came back when there are none, or when they are not a non-empty numeric
    1-D or 2-D array (a 1-D array is one action)."""
    if not isinstance(reply, Mapping):
        raise ReplyError(f"the reply is a {type(reply).__name__}, not a map")
    if "actions" not in reply:
        raise ReplyError(f"the reply holds no \"actions\" (keys: {sorted(map(str, reply))})")
    actions = reply["actions"]
    if not isinstance(actions, np.ndarray):
        raise ReplyError(f"\"actions\" is a {type(actions).__name__}, not an array")
    if actions.ndim not in (1, 2) or actions.size == 0 or actions.dtype.kind not in "iuf":
        raise ReplyError(f"\"actions\" must be a non-empty numeric (chunk, dim) array; got "
                         f"{actions.dtype} {tuple(actions.shape)}")
    return np.atleast_2d(actions)
