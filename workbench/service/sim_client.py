"""The agent side of the SIM service: a client and a :class:`RemoteAdapter`.

:class:`SimClient` speaks ``workbench.sim-server/v2`` (see
:mod:`workbench.service.sim_server`): it numbers its requests, waits for each reply,
turns an ``error`` reply into :class:`ServiceError` and a lost connection or timeout
into :class:`~workbench.contracts.results.InfrastructureError`. It never resends a
request whose reply was lost.

:class:`RemoteAdapter` makes a service look like a local benchmark adapter to the one
step loop, so a remote run keeps the records of a local one. It belongs to the trusted
driver: it holds the admin token on one connection, takes a ticket for each case and
runs the case's session on a connection of its own that holds only that ticket; after
each executed control it reads the case's score on the admin connection, so it ends the
episode at its success although the public channel never says so. The policy only ever
sees the observations the loop hands it (declared public features).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import websockets
from websockets.sync.client import ClientConnection, connect

from workbench.benchmarks.base import BenchmarkAdapter, StepResult
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import ActionRejected, Protocol
from workbench.contracts.results import InfrastructureError
from workbench.contracts.wire import MAX_FRAME_BYTES, WireError, decode, encode
from workbench.errors import WorkbenchError
from workbench.service.sim_server import PROTOCOL


class ServiceError(WorkbenchError, RuntimeError):
    """The service answered a request with an error (``code`` and its message)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class ArtifactMismatch(WorkbenchError, RuntimeError):
    """A downloaded artifact's size or SHA-256 differs from the manifest."""


class SimClient:
    """One connection to a SIM service, joined with the admin ``token`` (the operator's
    connection) or a ``ticket`` (one case's session)."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 60.0,
                 max_frame_bytes: int = MAX_FRAME_BYTES, ticket: str | None = None) -> None:
        self.url, self.timeout_s, self.max_frame_bytes = url, timeout_s, max_frame_bytes
        self._seq = 0
        try:
            self._ws: ClientConnection = connect(url, max_size=max_frame_bytes,
                                                 open_timeout=timeout_s, ping_interval=None)
        except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
            raise InfrastructureError(f"SIM service at {url} unreachable: "
                                      f"{type(exc).__name__}: {exc}") from None
        hello = {"protocol": PROTOCOL} | ({"token": token} if token else {}) | \
            ({"ticket": ticket} if ticket else {})
        self.welcome = self.request("hello", **hello)

    def request(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return its reply; raises :class:`ServiceError` for an
        error reply, InfrastructureError when the transport fails."""
        seq, self._seq = self._seq, self._seq + 1
        try:
            self._ws.send(encode({"type": kind, "seq": seq, **fields}))
            reply = decode(self._ws.recv(timeout=self.timeout_s), self.max_frame_bytes)
        except (websockets.ConnectionClosed, OSError, TimeoutError, WireError) as exc:
            self.close()
            raise InfrastructureError(f"SIM service at {self.url}: {kind} (seq {seq}) got no "
                                      f"reply: {type(exc).__name__}: {exc}") from None
        if not isinstance(reply, dict) or reply.get("seq") != seq:
            self.close()
            raise InfrastructureError(f"SIM service at {self.url}: reply to {kind} (seq "
                                      f"{seq}) is out of order")
        if reply.get("type") == "error":
            raise ServiceError(str(reply.get("code")), str(reply.get("message")))
        return reply

    @property
    def open(self) -> bool:
        return self._ws.state is websockets.protocol.State.OPEN

    def close(self) -> None:
        self._ws.close()

    # -- admin --------------------------------------------------------------------------
    def fetch_artifact(self, entry: dict[str, Any], target: str | Path) -> Path:
        """Download one manifest entry in bounded chunks; check its size and SHA-256.
        A mismatch raises :class:`ArtifactMismatch`; a failed download (a mismatch, an
        error reply, a lost connection) leaves no partial file."""
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        chunk = int(self.welcome["limits"]["chunk_bytes"])
        try:
            with target.open("wb") as f:
                while size < entry["size"]:
                    data = self.request("artifact", name=entry["name"], offset=size,
                                        length=chunk)["data"]
                    if not data:
                        break
                    f.write(data)
                    digest.update(data)
                    size += len(data)
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        if size != entry["size"] or digest.hexdigest() != entry["sha256"]:
            target.unlink()
            raise ArtifactMismatch(f"artifact {entry['name']}: got {size} bytes with SHA-256 "
                                   f"{digest.hexdigest()[:12]}, manifest says {entry['size']} "
                                   f"bytes, {entry['sha256'][:12]}")
        return target


class RemoteAdapter(BenchmarkAdapter):
    """A SIM service behind the adapter interface (driver side; see the module docstring).

    features: what the policy reads (requested at each start); eager: ask for the
    observation with every control (else fetched only when the step loop reads one).
    """

    def __init__(self, url: str, protocol: Protocol, name: str, suite: str, max_steps: int,
                 features: Sequence[str], token: str | None = None,
                 timeout_s: float = 60.0, eager: bool = False) -> None:
        self.url, self.protocol, self.name, self.suite = url, protocol, name, suite
        self.max_steps, self.features, self.token = max_steps, tuple(features), token
        self.timeout_s, self.eager = timeout_s, eager
        self.client: SimClient | None = None  # the admin connection
        self.session: SimClient | None = None  # the running case's, joined with its ticket
        self._instructions: dict[str, str] = {}
        self._case: str | None = None
        self._obs: tuple[int, dict[str, Any]] | None = None
        self._steps = 0
        self._running = False
        self.retrying = False
        """Start the next case with the admin's retry flag (an explicit retry)."""

    @classmethod
    def list_suites(cls) -> list[str]:
        return []

    @classmethod
    def suite_tasks(cls, suite: str) -> list[str]:
        raise ValueError("a remote adapter's tasks are the service's schedule")

    def connect(self) -> dict[str, Any]:
        """Join the service (again, after a lost connection); returns its welcome."""
        if self.client is None or not self.client.open:
            self.client = SimClient(self.url, self.token, self.timeout_s)
        return self.client.welcome

    def instruction(self, task: str) -> str:
        return self._instructions.get(task, "")

    def reset(self, episode: EpisodeSpec) -> None:
        self._end_session()
        ticket = self._call("ticket", case=episode.episode_id, retry=self.retrying)["ticket"]
        self.session = SimClient(self.url, timeout_s=self.timeout_s, ticket=ticket)
        reply = self._call("start", on=self.session, features=list(self.features))
        self._running = True
        self._case, self._steps = episode.episode_id, 0
        self._instructions[episode.task] = reply["instruction"]
        self._obs = (0, reply["observation"])

    def step(self, action: np.ndarray) -> StepResult:
        try:
            reply = self._running_session().request("step", action=np.asarray(action),
                                                    observe=self.eager)
        except ServiceError as exc:
            self._running = False
            raise InfrastructureError(f"SIM service refused a step: {exc}") from None
        if reply["type"] == "rejected":
            if reply.get("done"):
                self._running = False
            raise ActionRejected(str(reply["message"]))
        self._steps = int(reply["step"])
        if "observation" in reply:
            self._obs = (self._steps, reply["observation"])
        score = self._call("score", case=self._case)
        if not reply["done"] and score["terminal_step"] is None:
            return StepResult(0.0, False, False)
        if not reply["done"]:  # a success, which only the admin connection is told
            self._end_session()
            score = self._call("score", case=self._case)
        self._running = False
        return StepResult(0.0, bool(score["success"]), True,
                          {"termination": score["termination"]})

    def observe(self, features: Sequence[str]) -> dict[str, Any]:
        if self._obs is None or self._obs[0] != self._steps:
            reply = self._call("observe", on=self._running_session())
            self._obs = (int(reply["step"]), reply["observation"])
        obs = self._obs[1]
        missing = [f for f in features if f not in obs]
        if missing:
            raise InfrastructureError(f"SIM service sent no {missing} (requested at start: "
                                      f"{list(self.features)})")
        return {f: obs[f] for f in features}

    def trajectory_state(self) -> np.ndarray:
        """Nothing private crosses the wire: the rollout's state is the public ``state``
        feature when the policy reads it, else empty."""
        if self._obs is not None and "state" in self._obs[1]:
            return np.asarray(self._obs[1]["state"], np.float32)
        return np.zeros(0, np.float32)

    def render(self, feature: str) -> np.ndarray:
        raise InfrastructureError("videos of a SIM service are recorded on the service "
                                  "(artifacts), not rendered by the driver")

    def close(self) -> None:
        try:
            self._end_session()
        except InfrastructureError:
            pass
        if self.client is not None:
            self.client.close()
            self.client = None

    def _end_session(self) -> None:
        """End the running session (if any) and close its connection."""
        session, running = self.session, self._running
        self.session, self._running = None, False
        if session is None:
            return
        try:
            if running and session.open:
                self._call("end", on=session)
        finally:
            session.close()

    def _running_session(self) -> SimClient:
        if self.session is None or not self.session.open or not self._running:
            self._running = False
            raise InfrastructureError(f"SIM service at {self.url}: the session of "
                                      f"{self._case} is gone (connection closed)")
        return self.session

    def _client(self) -> SimClient:
        if self.client is None or not self.client.open:
            self.connect()
        return self.client

    def _call(self, kind: str, on: SimClient | None = None, **fields: Any) -> dict[str, Any]:
        """A request (on the admin connection unless ``on``) whose error reply is the
        harness's fault (not the policy's)."""
        try:
            return (on or self._client()).request(kind, **fields)
        except ServiceError as exc:
            raise InfrastructureError(f"SIM service: {kind}: {exc}") from None
