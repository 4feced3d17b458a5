"""A workbench policy served elsewhere, reached over the workbench's own policy wire
(:mod:`workbench.wires.native`; ``workbench serve-policy --wire workbench``).

The framing is openpi's (for openpi's own servers and observation keys use ``policy:
openpi``, :mod:`workbench.policies.openpi`): the client connects; the server first
sends one msgpack frame holding its metadata map; then each request is
one frame holding an observation map and each reply one frame holding at least
``"actions"``, a ``(chunk, dim)`` array. Frames are encoded by
:mod:`workbench.contracts.wire` (arrays as openpi's ``msgpack_numpy`` typed dicts).

What is sent: only the declared ``features`` of each observation (arrays and
strings). ``episode_id`` and ``step`` are dropped: an openpi server's input transforms
expect the model's keys only, and the episode is bound to the connection instead
(each active episode holds its own connection; a connection is reused by the next
episode once its episode ends).

What the metadata supplies, unless the constructor sets it: ``protocol`` (a given one
must match the server's when the server declares one), ``features``, ``chunk_size``
and ``privileged`` (also implied by a ``privileged.*`` feature). Capabilities are
fixed before the first action (the runner checks them against the benchmark before
any episode), so a chunk size neither given nor declared is 1: the first action of
each returned chunk is executed and the server asked again at the next step. With
``"reset": true`` in the metadata, every episode starts with a ``{"reset": true,
"episode_id", "task", "instruction", "seed"}`` frame that the server acknowledges with
``{"reset": true, ..}``; openpi's own servers have no reset message, so nothing is
sent. A connection found closed is replaced by a fresh one at the next episode.

Who is to blame when a call fails:

- :class:`~workbench.contracts.results.InfrastructureError` (the harness, left out of
  success rates): the server cannot be reached or sends no metadata in ``timeout_s``;
  the connection drops; no reply in ``timeout_s``; a reply that is not msgpack, not a
  map, over ``max_frame_bytes`` or without a numeric 1-D or 2-D ``"actions"`` array; a
  reset not acknowledged; an ``{"error": ...}`` reply that does not blame the policy
  (the server could not read the request, or failed itself); an observation that may
  not be encoded; a server whose metadata changed between connections;
- :class:`RemotePolicyError` (the policy, a failed episode): an ``{"error": ...,
  "blame": "policy"}`` reply (the served policy raised, or broke its action contract),
  or a text frame, which is how an openpi server reports that its ``infer`` raised;
- actions outside the benchmark's contract (dimension, bounds, NaN) are checked by the
  runner, as for any policy: a policy error.

Metadata the constructor's options cannot reconcile (another protocol, no features)
raises ValueError.

>>> RemotePolicy("http://localhost:8000")
Traceback (most recent call last):
...
ValueError: url must start with ws:// or wss://; got 'http://localhost:8000'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.protocol import State
from websockets.sync.client import connect

from workbench.contracts.capabilities import Capabilities, EpisodeContext, LoadContext, Observation
from workbench.contracts.results import InfrastructureError
from workbench.contracts.wire import MAX_FRAME_BYTES, WireError, decode, encode
from workbench.errors import PolicyError
from workbench.policies.base import Policy
from workbench.wires.native import one_line

class RemotePolicyError(PolicyError):
    """The remote policy itself failed (the server says so): a policy error."""


def capabilities_from_metadata(metadata: Any, protocol: str | None = None,
                               features: Sequence[str] | None = None,
                               chunk_size: int | None = None) -> Capabilities:
    """What a server's ``metadata`` map declares, with the given options taking its place
    where set; raises ValueError when they disagree or something needed is missing.

    >>> capabilities_from_metadata({"protocol": "metaworld-v1", "features": ["state"],
    ...                             "chunk_size": 4}).chunk_size
    4
    >>> capabilities_from_metadata({}, protocol="libero-v1")
    Traceback (most recent call last):
    ...
    ValueError: policy server declares no features; pass features=[...]
    """
    if not isinstance(metadata, Mapping):
        raise ValueError(f"policy server metadata: expected a map; got {type(metadata).__name__}")
    declared = _str_field(metadata, "protocol")
    if protocol is not None and declared is not None and protocol != declared:
        raise ValueError(f"policy server emits actions for protocol {declared!r}, "
                         f"not {protocol!r}")
    protocol = protocol or declared
    if protocol is None:
        raise ValueError("policy server declares no protocol; pass protocol=...")
    served = _features_field(metadata)
    if features is None and served is None:
        raise ValueError("policy server declares no features; pass features=[...]")
    chosen = tuple(features) if features is not None else served
    missing = [f for f in served or () if f not in chosen]
    if missing:
        raise ValueError(f"policy server reads features {missing} that features= leaves out")
    chunk = chunk_size if chunk_size is not None else metadata.get("chunk_size", 1)
    if not isinstance(chunk, int) or isinstance(chunk, bool):
        raise ValueError(f"policy server metadata: chunk_size: expected an int; got {chunk!r}")
    privileged = metadata.get("privileged") is True or \
        any(f.startswith("privileged.") for f in chosen)
    return Capabilities(protocol, chosen, chunk_size=chunk, privileged=privileged)


def _str_field(metadata: Mapping, key: str) -> str | None:
    value = metadata.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"policy server metadata: {key}: expected a string; got {value!r}")
    return value


def _features_field(metadata: Mapping) -> tuple[str, ...] | None:
    value = metadata.get("features")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise ValueError(f"policy server metadata: features: expected a list of strings; "
                         f"got {value!r}")
    return tuple(value)


class _Link:
    """One connection to the server, its metadata read."""

    def __init__(self, url: str, timeout_s: float, max_frame_bytes: int) -> None:
        self.url, self.timeout_s, self.max_bytes = url, timeout_s, max_frame_bytes
        try:
            self.ws = connect(url, open_timeout=timeout_s, close_timeout=1.0, compression=None,
                              max_size=max_frame_bytes, ping_interval=None)
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise InfrastructureError(f"cannot connect to policy server {url}: "
                                      f"{one_line(str(exc) or type(exc).__name__)}") from None
        frame = self.receive("metadata")
        if isinstance(frame, str):
            self.close()
            raise InfrastructureError(f"policy server {url} sent text, not its metadata: "
                                      f"{one_line(frame)}")
        self.metadata = self.decode(frame, "metadata")

    @property
    def alive(self) -> bool:
        return self.ws.protocol.state is State.OPEN

    def request(self, message: Mapping[str, Any], what: str) -> Any:
        """Send ``message``; the reply decoded, or a str when the server sent text."""
        try:
            frame = encode(dict(message))
        except WireError as exc:
            raise InfrastructureError(f"cannot send to policy server {self.url}: {exc}") from None
        try:
            self.ws.send(frame)
        except ConnectionClosed as exc:
            raise self._dropped(exc, what) from None
        reply = self.receive(what)
        return reply if isinstance(reply, str) else self.decode(reply, what)

    def receive(self, what: str) -> bytes | str:
        try:
            return self.ws.recv(timeout=self.timeout_s)
        except TimeoutError:
            self.close()  # a late reply would be read as the next one
            raise InfrastructureError(f"policy server {self.url} sent no {what} within "
                                      f"{self.timeout_s:g} s") from None
        except ConnectionClosed as exc:
            raise self._dropped(exc, what) from None

    def decode(self, frame: bytes, what: str) -> Any:
        try:
            return decode(frame, self.max_bytes)
        except WireError as exc:
            self.close()
            raise InfrastructureError(f"malformed {what} from policy server {self.url}: "
                                      f"{exc}") from None

    def _dropped(self, exc: Exception, what: str) -> InfrastructureError:
        return InfrastructureError(f"policy server {self.url} closed the connection while "
                                   f"waiting for {what} ({one_line(str(exc))})")

    def close(self) -> None:
        self.ws.close()


@dataclass
class _RemoteEpisode:
    link: _Link


class RemotePolicy(Policy):
    """A policy behind an openpi-style WebSocket server at ``url`` (see the module).

    protocol: the benchmark protocol its actions follow (default: the server's; the
    runner passes the benchmark's). features: observation features sent (default: the
    server's). chunk_size: actions executed per reply (default: the server's, else 1).
    timeout_s: longest wait to connect and for each reply. max_frame_bytes: largest
    frame accepted. name: the policy's name in records (default ``remote-<server's
    policy name>``, or ``remote``). Reading ``capabilities`` or ``name`` before
    :meth:`load` reads the server's metadata over a short connection.
    """

    def __init__(self, url: str, protocol: str | None = None,
                 features: Sequence[str] | None = None, chunk_size: int | None = None,
                 timeout_s: float = 30.0, max_frame_bytes: int = MAX_FRAME_BYTES,
                 name: str | None = None) -> None:
        super().__init__()
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise ValueError(f"url must start with ws:// or wss://; got {url!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected > 0; got {timeout_s}")
        if features is not None and (isinstance(features, str) or
                                     not all(isinstance(f, str) for f in features)):
            raise ValueError(f"features: expected a list of feature names; got {features!r}")
        self.url, self.timeout_s, self.max_frame_bytes = url, float(timeout_s), max_frame_bytes
        self._options = (protocol, None if features is None else tuple(features), chunk_size)
        self._name = name
        self._metadata: Mapping[str, Any] | None = None
        self._caps: Capabilities | None = None
        self._idle: list[_Link] = []

    # -- what the server declares ------------------------------------------------
    @property
    def name(self) -> str:  # type: ignore[override]
        if self._name is None:
            served = self._describe().get("policy")
            self._name = f"remote-{served}" if isinstance(served, str) and served else "remote"
        return self._name

    @property
    def capabilities(self) -> Capabilities:
        if self._caps is None:
            self._caps = capabilities_from_metadata(self._describe(), *self._options)
        return self._caps

    @property
    def metadata(self) -> Mapping[str, Any]:
        """The server's metadata map (read over a short connection when not yet read)."""
        return self._describe()

    def preflight(self) -> Capabilities:
        """Check, with no benchmark and no action, that the server answers and its metadata
        fits the options; returns the capabilities. Raises InfrastructureError when it
        cannot be reached, ValueError when its metadata does not fit."""
        link = self._open()
        link.close()
        self._metadata = link.metadata
        return capabilities_from_metadata(link.metadata, *self._options)

    def _describe(self) -> Mapping[str, Any]:
        if self._metadata is None:
            self.preflight()
        assert isinstance(self._metadata, Mapping)
        return self._metadata

    # -- lifecycle -----------------------------------------------------------------
    def _load(self, context: LoadContext) -> None:
        link = self._open()
        try:
            self._caps = capabilities_from_metadata(link.metadata, *self._options)
        except ValueError:
            link.close()
            raise
        self._metadata = link.metadata
        self._idle.append(link)

    def _reset(self, context: EpisodeContext) -> _RemoteEpisode:
        link = self._take()
        try:
            if self._describe().get("reset") is True:
                reply = link.request({"reset": True, "episode_id": context.episode_id,
                                      "task": context.task, "instruction": context.instruction,
                                      "seed": context.seed}, "reset acknowledgement")
                if _check_reply(reply, link.url).get("reset") is not True:
                    raise InfrastructureError(f"policy server {link.url} did not acknowledge "
                                              f"the reset: {one_line(repr(reply))}")
        except Exception:
            self._give_back(link)
            raise
        return _RemoteEpisode(link)

    def _act(self, observation: Observation, episode: _RemoteEpisode) -> np.ndarray:
        features = self.capabilities.features
        missing = [f for f in features if f not in observation]
        if missing:
            raise ValueError(f"observation lacks features {missing}")
        reply = episode.link.request({f: observation[f] for f in features}, "actions")
        return _actions(_check_reply(reply, self.url), self.url)

    def _end_episode(self, episode_id: str, episode: _RemoteEpisode) -> None:
        self._give_back(episode.link)

    def _unload(self) -> None:
        while self._idle:
            self._idle.pop().close()

    def unreachable(self) -> str | None:
        """Why the server cannot take an episode now (it cannot be reached), or None;
        a live connection is kept for the next episode."""
        try:
            self._give_back(self._take())
        except InfrastructureError as exc:
            return str(exc)
        return None

    # -- connections -----------------------------------------------------------------
    def _open(self) -> _Link:
        return _Link(self.url, self.timeout_s, self.max_frame_bytes)

    def _take(self) -> _Link:
        """An idle live connection, or a new one whose metadata declares the same."""
        while self._idle:
            link = self._idle.pop()
            if link.alive:
                return link
            link.close()
        link = self._open()
        try:
            fresh = capabilities_from_metadata(link.metadata, *self._options)
        except ValueError as exc:
            link.close()
            raise InfrastructureError(f"policy server {self.url} changed: {exc}") from None
        if fresh != self.capabilities:
            link.close()
            raise InfrastructureError(f"policy server {self.url} changed: it now declares "
                                      f"{fresh}, not {self.capabilities}")
        return link

    def _give_back(self, link: _Link) -> None:
        if link.alive:
            self._idle.append(link)
        else:
            link.close()


def _check_reply(reply: Any, url: str) -> Mapping[str, Any]:
    """The reply map; raises for a server's error (see the module for who is blamed)."""
    if isinstance(reply, str):
        lines = [line for line in reply.strip().splitlines() if line.strip()]
        raise RemotePolicyError(f"policy server {url} reported: "
                                f"{one_line(lines[-1] if lines else reply)}")
    if not isinstance(reply, Mapping):
        raise InfrastructureError(f"malformed reply from policy server {url}: "
                                  f"a {type(reply).__name__}, not a map")
    if "error" in reply:
        message = f"policy server {url}: {one_line(str(reply['error']))}"
        if reply.get("blame") == "policy":
            raise RemotePolicyError(message)
        raise InfrastructureError(message)
    return reply


def _actions(reply: Mapping[str, Any], url: str) -> np.ndarray:
    """``reply["actions"]`` as a float32 ``(chunk, dim)`` array."""
    actions = reply.get("actions")
    if not isinstance(actions, np.ndarray) or actions.ndim not in (1, 2) or \
            actions.size == 0 or actions.dtype.kind not in "iuf":
        got = f"{actions.dtype} {actions.shape}" if isinstance(actions, np.ndarray) \
            else type(actions).__name__
        raise InfrastructureError(f"malformed reply from policy server {url}: \"actions\" must "
                                  f"be a non-empty numeric (chunk, dim) array; got {got}")
    return np.atleast_2d(actions).astype(np.float32)
