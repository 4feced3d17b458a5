"""Raw WebSocket clients of the SIM service for its conformance and fuzz tests.

A :class:`Wire` numbers requests by hand and checks every reply it receives: no
traceback or workbench source path anywhere, and, on a connection that is not an admin
one, nothing that names rewards, success, scores, terminal steps or privileged features.
Test modules reach it through the ``wire_kit`` fixture (two ``conftest`` modules in the
tree make ``from conftest import ...`` ambiguous).
"""

from types import SimpleNamespace
from typing import Any, Iterator

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from workbench.contracts.wire import decode, encode
from workbench.service.sim_server import PROTOCOL

RECV_S = 10.0
"""Longest a test client waits for any frame (a server that hangs fails, never blocks)."""
SECRET_WORDS = ("reward", "success", "score", "terminal_step", "privileged")
INTERNALS = ("Traceback", "/workbench/")


def _walk(value: Any, path: str = "$") -> Iterator[tuple[str, Any]]:
    """(path, value) of every map key (path ending ``#key``) and value, depth first."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key}#key", key
            yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")


def consumed_seq(reply: dict[str, Any]) -> bool:
    """Whether the server accepted the request's ``seq`` (the next one is due): every
    reply but a frame it could not read as a request (``seq`` None) or a ``sequence``
    refusal."""
    return reply.get("seq") is not None and reply.get("code") != "sequence"


def reply_faults(reply: Any, admin: bool) -> list[str]:
    """What a reply must never carry: internals anywhere; secrets unless ``admin``.

    An error's ``message`` may echo what the client sent, so it is checked for internals
    only; every map key and every other string is checked for the secret words too.
    """
    faults = []
    echo = "$.message" if isinstance(reply, dict) and reply.get("type") == "error" else None
    for path, value in _walk(reply):
        if not isinstance(value, str):
            continue
        faults += [f"{path} holds {word!r}: {value[:80]!r}" for word in INTERNALS
                   if word in value]
        if not admin and path != echo:
            faults += [f"{path} names {word!r}: {value[:80]!r}" for word in SECRET_WORDS
                       if word in value]
    return faults


class Wire:
    """One raw connection; ``seq`` is the next sequence number the server expects."""

    def __init__(self, url: str) -> None:
        self.ws = connect(url, max_size=None, open_timeout=RECV_S, ping_interval=None)
        self.seq = 0
        self.admin = False
        self.case: str | None = None  # the case of the ticket it joined with
        self.replies: list[dict[str, Any]] = []

    def recv(self) -> dict[str, Any]:
        reply = decode(self.ws.recv(timeout=RECV_S))
        assert isinstance(reply, dict) and isinstance(reply.get("type"), str), reply
        assert not reply_faults(reply, self.admin), reply_faults(reply, self.admin)
        self.replies.append(reply)
        return reply

    def exchange(self, frame: bytes | str) -> dict[str, Any]:
        self.ws.send(frame)
        return self.recv()

    def request(self, kind: Any, seq: Any = None, **fields: Any) -> dict[str, Any]:
        """Send ``{type: kind, seq, **fields}`` (seq: the expected one unless given)."""
        sent = self.seq if seq is None else seq
        reply = self.exchange(encode({"type": kind, "seq": sent, **fields}))
        if consumed_seq(reply):
            assert reply["seq"] == sent == self.seq, (reply, sent, self.seq)
            self.seq += 1
        return reply

    def hello(self, token: str | None = None, ticket: str | None = None) -> dict[str, Any]:
        """Join with the admin ``token`` or a ``ticket`` (a session's key to one case)."""
        reply = self.request("hello", protocol=PROTOCOL,
                             **({"token": token} if token is not None else {}),
                             **({"ticket": ticket} if ticket is not None else {}))
        assert reply["type"] == "welcome", reply
        self.admin, self.case = reply["admin"], reply["case"]
        return reply

    def closed_with(self) -> int:
        """Wait for the server to close this connection; its close code."""
        with pytest.raises(ConnectionClosed) as info:
            self.recv()
        assert info.value.rcvd is not None, "the server sent no close frame"
        assert not any(word in info.value.rcvd.reason for word in INTERNALS)
        return info.value.rcvd.code

    def close(self) -> None:
        self.ws.close()


def take_ticket(url: str, token: str, case: str, retry: bool = False) -> str:
    """A ticket for ``case``, asked for on an admin connection of its own."""
    admin = Wire(url)
    admin.hello(token)
    reply = admin.request("ticket", case=case, retry=retry)
    admin.close()
    assert reply["type"] == "ticket" and reply["case"] == case, reply
    return reply["ticket"]


@pytest.fixture(scope="session")
def wire_kit() -> SimpleNamespace:
    """The raw client, its reply check and its receive timeout."""
    return SimpleNamespace(Wire=Wire, reply_faults=reply_faults, consumed_seq=consumed_seq,
                           RECV_S=RECV_S, take_ticket=take_ticket)
