"""One client connection to a policy server, and who is to blame when a call fails.

Used by the clients of other ecosystems' servers (``policy: openpi``,
``policy: vla-eval``). Those servers *are* the policy under evaluation (a model and the
code that serves it), so:

- :class:`TransportError` (an infrastructure error, left out of success rates): the
  server cannot be reached, the connection drops, or no frame comes within the timeout;
- :class:`ServerError` (the policy's failure): the server reports that it failed (an
  openpi traceback frame, a vla-eval ``error`` message);
- :class:`MalformedReply` (the policy's failure): a reply that is not a frame of the wire,
  or holds no usable actions; its message names what came back;
- :class:`PreflightError` (a ValueError: the run stops before any case is claimed, and
  ``workbench eval`` exits 2 in one line): the handshake found a mismatch.
"""

from __future__ import annotations

from typing import Any

from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.protocol import State
from websockets.sync.client import ClientConnection, connect

from workbench.errors import ConfigError, PolicyError, TransportError
from workbench.wires.native import one_line


class ServerError(PolicyError):
    """The policy server reported that it failed: a policy error."""


class MalformedReply(PolicyError):
    """A reply that cannot be acted on: a policy error naming what came back."""


class PreflightError(ConfigError):
    """The handshake before the run found that client and server do not fit."""


class ServerClient:
    """What a policy behind another ecosystem's server (``url``, ``timeout_s``,
    ``max_frame_bytes``) shares: whether that server can take an episode now."""

    url: str
    timeout_s: float
    max_frame_bytes: int

    def unreachable(self) -> str | None:
        """Why the server cannot take an episode now (a WebSocket opened and closed), or
        None; asked before each claim (:func:`workbench.runtime.guard.unreachable`)."""
        try:
            Link(self.url, self.timeout_s, self.max_frame_bytes).close()
        except TransportError as exc:
            return str(exc)
        return None


class Link:
    """A WebSocket connection to ``url``; every wait bounded by ``timeout_s``."""

    def __init__(self, url: str, timeout_s: float, max_frame_bytes: int) -> None:
        self.url, self.timeout_s = url, timeout_s
        try:
            self.ws: ClientConnection = connect(url, open_timeout=timeout_s,
                                                close_timeout=1.0, compression=None,
                                                max_size=max_frame_bytes, ping_interval=None)
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise TransportError(f"cannot connect to policy server {url}: "
                                 f"{one_line(str(exc) or type(exc).__name__)}") from None

    @property
    def alive(self) -> bool:
        return self.ws.protocol.state is State.OPEN

    def send(self, frame: bytes, what: str) -> None:
        try:
            self.ws.send(frame)
        except (ConnectionClosed, OSError) as exc:
            raise self._dropped(exc, what) from None

    def receive(self, what: str) -> bytes | str:
        """The next frame; a reply that does not come in time closes the link (a late one
        would be read as the answer to the next request)."""
        try:
            return self.ws.recv(timeout=self.timeout_s)
        except TimeoutError:
            self.close()
            raise TransportError(f"policy server {self.url} sent no {what} within "
                                 f"{self.timeout_s:g} s") from None
        except (ConnectionClosed, OSError) as exc:
            raise self._dropped(exc, what) from None

    def _dropped(self, exc: Exception, what: str) -> TransportError:
        return TransportError(f"policy server {self.url} closed the connection while "
                              f"waiting for {what} ({one_line(str(exc))})")

    def close(self) -> None:
        self.ws.close()

    def __enter__(self) -> "Link":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_url(url: Any) -> str:
    """``url`` when it is a ws:// or wss:// URL; refuses anything else."""
    if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
        raise ValueError(f"url must start with ws:// or wss://; got {url!r}")
    return url


def check_timeout(timeout_s: Any) -> float:
    """``timeout_s`` when it is a finite number of seconds > 0."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or \
            not 0 < timeout_s < float("inf"):
        raise ValueError(f"timeout_s: expected a finite number of seconds > 0; got {timeout_s!r}")
    return float(timeout_s)
