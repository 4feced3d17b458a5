"""Any workbench policy served on the wire its clients speak.

``workbench serve-policy POLICY --wire workbench|openpi|vla-eval`` (or
:func:`serve_policy` from Python) serves one policy to any number of connections:

- ``workbench`` (:mod:`workbench.wires.native`): canonical feature names, explicit
  resets, ``{"error", "blame"}`` replies; what ``policy: remote`` speaks.
- ``openpi`` (:mod:`workbench.wires.openpi`): openpi-client's ``WebsocketClientPolicy``,
  ``ActionChunkBroker`` and openpi's example loops work unchanged. Requests are read
  through an observation preset (:mod:`workbench.wires.presets`, ``openpi/libero`` for a
  LIBERO policy unless ``--preset`` or ``--keys`` says otherwise). There is no episode
  message on this wire: a connection is one episode, and a new ``prompt`` on it starts
  the next. An error is sent as openpi's server sends it, a traceback text frame, then
  close 1011. ``--min-chunk K`` repeats a chunk's last action until it holds K actions
  (openpi's LIBERO client asserts ``len(chunk) >= replan_steps``); the metadata says so.
- ``vla-eval`` (:mod:`workbench.wires.vla_eval`): vla-eval's runner (``vla-eval run``)
  works unchanged: its hello is answered, each episode start resets the policy, each
  observation gets one action (the server keeps the policy's chunk and hands it out one
  action per observation, as vla-eval's own chunking servers do); a failed observation
  is answered with vla-eval's ``error`` message and the connection stays open.

Observations from all connections are batched into the policy's ``act_batch``
(``--max-batch``, ``--max-wait-ms``; :class:`~workbench.service.policy_calls.PolicyCalls`),
each connection keeping its own episode; one connection's bad request or policy fault
answers that connection alone. A policy call past ``--call-timeout-s`` fails the calls
waiting on it, and every later one while it lasts, as the server's fault. Connections
(``--max-connections``), frame size (``--max-frame-bytes``) and silence
(``--idle-timeout-s``) are bounded; the server binds loopback unless told otherwise and
stops within a few seconds of SIGINT or SIGTERM, whatever the policy is doing.
``GET /healthz`` (and ``/health``) answers 200; ``GET /stats`` the counters as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import logging
import signal
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Callable, Mapping

import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from workbench.contracts.capabilities import EpisodeContext, LoadContext
from workbench.contracts.protocols import (
    ContractError,
    get_protocol,
    validate_action,
    validate_observation,
)
from workbench.contracts.results import load_blamed_on
from workbench.contracts.wire import MAX_FRAME_BYTES, WireError, decode, encode
from workbench.policies import policy_factory
from workbench.policies.base import Policy
from workbench.runtime.job import build_policy
from workbench.service.policy_calls import PolicyCalls, PolicyStuck
from workbench.wires import check_wire, native, openpi, vla_eval
from workbench.wires.presets import Preset, choose_preset

SERVER_NAME = native.SERVER
CONTROL_KEYS = ("episode_id", "step")
"""Plain fields a native client may add to an observation; the connection's episode wins."""
STOP_WITHIN_S = 4.0
"""Longest a stop waits for connections and the policy before giving up on them."""
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    """How a policy is served; every field validated here (see the module)."""

    wire: str = "workbench"
    preset: str | None = None
    keys: Mapping[str, Any] | None = None
    min_chunk: int | None = None
    max_batch: int = 8
    max_wait_ms: float = 5.0
    call_timeout_s: float = 60.0
    max_connections: int = 64
    idle_timeout_s: float = 300.0
    max_frame_bytes: int = MAX_FRAME_BYTES
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_wire(self.wire)
        _positive_int("max_batch", self.max_batch)
        _positive_int("max_connections", self.max_connections)
        _positive_int("max_frame_bytes", self.max_frame_bytes, 1024)
        if self.min_chunk is not None:
            _positive_int("min_chunk", self.min_chunk)
        for name in ("max_wait_ms", "call_timeout_s", "idle_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not value == value or value == float("inf") or \
                    value < (0 if name == "max_wait_ms" else 1e-3):
                raise ValueError(f"{name}: expected a finite number "
                                 f"{'>= 0' if name == 'max_wait_ms' else '> 0'}; got {value!r}")
        if self.wire == "workbench" and (self.preset is not None or self.keys is not None):
            raise ValueError("--preset and --keys are for the openpi and vla-eval wires; the "
                             "workbench wire speaks canonical feature names")
        if self.preset is not None and self.keys is not None:
            raise ValueError("give a preset or a key map, not both")


def _positive_int(name: str, value: Any, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: expected an integer >= {low}; got {value!r}")


def server_preset(wire: str, protocol: str, preset: str | None = None,
                  keys: Mapping[str, Any] | None = None) -> Preset | None:
    """The preset a wire reads ``protocol``'s observations with (see
    :func:`workbench.wires.presets.choose_preset`); None on the workbench wire."""
    if wire == "workbench":
        return None
    return choose_preset(wire, protocol, preset, keys,
                         "pass --preset NAME or --keys '{their_key: feature, ...}'")


def policy_metadata(policy: Policy, options: ServeOptions = ServeOptions(),
                    preset: Preset | None = None) -> dict[str, Any]:
    """The metadata map a client receives on connecting (the policy need not be loaded).

    >>> from workbench.policies import make_policy
    >>> meta = policy_metadata(make_policy("zero", protocol="metaworld-v1"))
    >>> meta["protocol"], meta["features"], meta["action"]["dim"], meta["reset"]
    ('metaworld-v1', ['state'], 4, True)
    """
    caps = policy.capabilities
    action = get_protocol(caps.action_protocol).action
    low, high = action.bounds()
    extra: dict[str, Any] = {"wire": options.wire, "max_frame_bytes": options.max_frame_bytes,
                             "max_batch": options.max_batch}
    if preset is not None:
        extra |= {"preset": preset.name, "expects": preset.describe()}
    if options.wire == "openpi":
        chunk = max(caps.chunk_size, options.min_chunk or 1)
        extra |= {"min_chunk": options.min_chunk, "padded": chunk > caps.chunk_size,
                  "returned_chunk": chunk}
    return native.metadata(policy.name, caps.action_protocol, list(caps.features),
                           caps.chunk_size, caps.privileged,
                           {"dim": action.dim, "dtype": action.dtype, "low": low.tolist(),
                            "high": high.tolist()}, **extra)


class _Refused(Exception):
    """A request the server cannot serve (blame: request)."""


class _PolicyFailed(Exception):
    """The policy raised or broke its action contract (blame: policy)."""


class _ServerFailed(Exception):
    """The server could not serve the call (a policy call past its time limit)."""


class PolicyServer:
    """Serves one ``policy`` (built, not loaded) on ``options.wire``; see the module.
    ``start`` loads it and listens; ``stop`` ends open episodes and unloads it."""

    def __init__(self, policy: Policy, options: ServeOptions = ServeOptions()) -> None:
        self.policy, self.options = policy, options
        self.protocol = get_protocol(policy.capabilities.action_protocol)
        self.preset = server_preset(options.wire, self.protocol.name, options.preset,
                                    options.keys)
        if self.preset is not None:
            missing = [f for f in policy.capabilities.features if f not in self.preset.features]
            if missing:
                raise ValueError(f"policy {policy.name} reads {missing}, which preset "
                                 f"{self.preset.name} does not carry (it carries "
                                 f"{list(self.preset.features)})")
        self.metadata = policy_metadata(policy, options, self.preset)
        self.calls: PolicyCalls | None = None
        self._server: Server | None = None
        self._ids = itertools.count()
        self._sessions: set[_Session] = set()
        self.counters: collections.Counter[str] = collections.Counter()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Load the policy and listen on ``host:port`` (0: any free port); returns the port."""
        opts = self.options
        self.calls = PolicyCalls(self.policy, opts.max_batch, opts.max_wait_ms,
                                 opts.call_timeout_s, senders=lambda: len(self._sessions))
        try:
            with load_blamed_on(self.metadata["policy"]):
                await self._wait(self.calls.call("load", LoadContext(self.protocol.name,
                                                                     device=opts.device)))
        except BaseException:
            self.calls.stop(0.1)
            raise
        self._server = await serve(self._handle, host, port, max_size=opts.max_frame_bytes,
                                   compression=None, close_timeout=1.0, ping_interval=None,
                                   process_request=self._http)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Close every connection (ending its episode), unload the policy; bounded by
        :data:`STOP_WITHIN_S` whatever the policy is doing."""
        if self._server is not None:
            self._server.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), STOP_WITHIN_S / 2)
            except asyncio.TimeoutError:
                log.warning("connections did not close in time; leaving them")
            self._server = None
        if self.calls is not None:
            try:
                await asyncio.wait_for(asyncio.wrap_future(self.calls.call("unload")),
                                       STOP_WITHIN_S / 2)
            except (asyncio.TimeoutError, Exception):
                log.warning("unloading the policy failed or did not return in time",
                            exc_info=True)
            self.calls.stop(0.5)

    def stats(self) -> dict[str, Any]:
        """The server's counters (connections, requests, errors by blame) and its policy
        thread's (batches by size, observations)."""
        return {"wire": self.options.wire, "open_connections": len(self._sessions),
                **dict(self.counters), **(self.calls.stats() if self.calls else {})}

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?")[0]
        if path in (native.HEALTH_PATH, vla_eval.HEALTH_PATH):
            return connection.respond(HTTPStatus.OK, "OK\n")
        if path == "/stats":
            return connection.respond(HTTPStatus.OK, json.dumps(self.stats()) + "\n")
        if len(self._sessions) >= self.options.max_connections:
            self.counters["connections_refused"] += 1
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE,
                                      f"at most {self.options.max_connections} connections\n")
        return None

    async def _handle(self, connection: ServerConnection) -> None:
        session = SESSIONS[self.options.wire](self, connection, f"c{next(self._ids)}/")
        self._sessions.add(session)
        self.counters["connections"] += 1
        try:
            await session.run()
        except ConnectionClosed:
            pass
        except asyncio.TimeoutError:
            self.counters["idle_closed"] += 1
            await connection.close(1000, f"idle for {self.options.idle_timeout_s:g} s")
        finally:
            self._sessions.discard(session)
            await session.close()

    async def _wait(self, future: Future, timeout_s: float | None = None) -> Any:
        """The result of a policy-thread call, bounded by the call time limit."""
        limit = self.options.call_timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), limit)
        except asyncio.TimeoutError:
            self.counters["call_timeouts"] += 1
            raise _ServerFailed(f"the policy call did not return within {limit:g} s") from None
        except PolicyStuck as exc:
            raise _ServerFailed(str(exc)) from None


@dataclass(eq=False)
class _Session:
    """One connection: its episode, and the wire's framing (subclasses)."""

    server: PolicyServer
    connection: ServerConnection
    prefix: str
    episode: str | None = None
    episodes: int = 0
    steps: int = 0
    instruction: str | None = None
    chunk: collections.deque = field(default_factory=collections.deque)

    async def run(self) -> None:
        raise NotImplementedError

    async def recv(self) -> bytes | str:
        return await asyncio.wait_for(self.connection.recv(),
                                      self.server.options.idle_timeout_s)

    # -- episodes ---------------------------------------------------------------------
    async def start(self, task: str, instruction: str, seed: int = 0,
                    episode_id: str | int | None = None) -> str:
        await self.end()
        self.episodes += 1
        name = f"{self.prefix}{episode_id if episode_id is not None else self.episodes}"
        await self._policy("reset", EpisodeContext(name, task, instruction, seed))
        self.episode, self.steps, self.instruction = name, 0, instruction
        self.chunk.clear()
        return name

    async def end(self) -> None:
        """End the open episode, if any (a failure is logged: the client moves on)."""
        episode, self.episode = self.episode, None
        if episode is not None:
            try:
                await self._policy("end_episode", episode)
            except Exception:
                log.warning("end_episode(%r) failed", episode, exc_info=True)

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.end(), STOP_WITHIN_S / 2)
        except asyncio.TimeoutError:
            log.warning("ending %s's episode did not return in time", self.prefix)

    async def _policy(self, method: str, *args: Any) -> Any:
        calls = self.server.calls
        assert calls is not None
        try:
            return await self.server._wait(calls.call(method, *args))
        except _ServerFailed:
            raise
        except Exception as exc:
            log.warning("policy %s raised", method, exc_info=True)
            raise _PolicyFailed(f"{method}: {type(exc).__name__}: {exc}") from None

    # -- actions ------------------------------------------------------------------------
    async def act(self, features: dict[str, Any], step: Any = None) -> tuple[np.ndarray, float]:
        """The policy's ``(chunk, dim)`` actions for ``features`` in the open episode,
        checked against the protocol, and the milliseconds the call took."""
        server, calls = self.server, self.server.calls
        assert calls is not None and self.episode is not None
        observation = features | {"episode_id": self.episode,
                                  "step": step if isinstance(step, int) else self.steps}
        start = time.perf_counter()
        try:
            action = await server._wait(calls.act(observation))
        except _ServerFailed:
            raise
        except Exception as exc:
            log.warning("policy act raised", exc_info=True)
            raise _PolicyFailed(f"act: {type(exc).__name__}: {exc}") from None
        infer_ms = (time.perf_counter() - start) * 1000.0
        try:
            chunk = validate_action(server.protocol, action)
        except ContractError as exc:
            raise _PolicyFailed(f"act: {exc}") from None
        self.steps += 1
        server.counters["requests"] += 1
        return np.ascontiguousarray(chunk, np.float32), infer_ms

    def count_error(self, blame: str) -> None:
        self.server.counters[f"errors_{blame}"] += 1


class _NativeSession(_Session):
    """The workbench wire (:mod:`workbench.wires.native`)."""

    async def run(self) -> None:
        await self.connection.send(encode(self.server.metadata))
        while True:
            frame = await self.recv()
            await self.connection.send(encode(await self.answer(frame)))

    async def answer(self, frame: bytes | str) -> dict[str, Any]:
        try:
            message = decode(frame, self.server.options.max_frame_bytes)
            if not isinstance(message, dict):
                raise _Refused(f"a request: expected a map; got {type(message).__name__}")
            if message.get("reset") is True:
                return await self._reset(message)
            return await self._act(message)
        except (_Refused, WireError) as exc:
            blame, text = "request", f"bad request: {exc}"
        except _PolicyFailed as exc:
            blame, text = "policy", str(exc)
        except _ServerFailed as exc:
            blame, text = "server", f"server error: {exc}"
        except Exception as exc:
            log.exception("policy server failed")
            blame, text = "server", f"server error ({type(exc).__name__})"
        self.count_error(blame)
        return native.error_reply(text, blame)

    async def _reset(self, message: Mapping[str, Any]) -> dict[str, Any]:
        episode_id = message.get("episode_id")
        if not isinstance(episode_id, (str, int)) or isinstance(episode_id, bool):
            raise _Refused("a reset needs an episode_id (a string or an integer)")
        seed = message.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise _Refused(f"seed: expected an integer; got {seed!r}")
        await self.start(_text(message, "task"), _text(message, "instruction"), seed,
                         episode_id)
        return {"reset": True, "episode_id": episode_id}

    async def _act(self, message: Mapping[str, Any]) -> dict[str, Any]:
        features = {k: v for k, v in message.items() if k not in CONTROL_KEYS}
        try:
            validate_observation(self.server.protocol, features,
                                 self.server.policy.capabilities.features)
        except ContractError as exc:
            raise _Refused(f"observation: {exc}") from None
        if self.episode is None:
            instruction = features.get("instruction", features.get("prompt", ""))
            await self.start(_text(features, "task"),
                             instruction if isinstance(instruction, str) else "", 0,
                             f"implicit-{self.episodes + 1}")
        chunk, infer_ms = await self.act(features, message.get("step"))
        return {"actions": chunk, "server_timing": {"infer_ms": infer_ms}}


class _OpenpiSession(_Session):
    """openpi's wire (:mod:`workbench.wires.openpi`)."""

    async def run(self) -> None:
        await self.connection.send(openpi.encode(self.server.metadata))
        while True:
            frame = await self.recv()
            try:
                reply = await self.answer(frame)
            except (_Refused, _PolicyFailed, _ServerFailed, WireError, ContractError) as exc:
                await self.fail(exc)
                return
            await self.connection.send(openpi.encode(reply))

    async def answer(self, frame: bytes | str) -> dict[str, Any]:
        if isinstance(frame, str):
            raise _Refused("expected a binary msgpack frame; got text")
        server = self.server
        assert server.preset is not None
        request = openpi.decode(frame, server.options.max_frame_bytes)
        features = server.preset.observation(request, server.protocol.name,
                                             server.policy.capabilities.features)
        instruction = features.get("instruction", request.get("prompt", ""))
        instruction = instruction if isinstance(instruction, str) else ""
        if self.episode is None or (instruction and instruction != self.instruction):
            await self.start("", instruction)
        chunk, infer_ms = await self.act(features)
        need = server.options.min_chunk or 0
        if len(chunk) < need:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], need - len(chunk), axis=0)])
        return openpi.actions_reply(chunk, infer_ms)

    async def fail(self, exc: BaseException) -> None:
        """openpi's error form: the traceback as a text frame, then close 1011."""
        self.count_error("policy" if isinstance(exc, _PolicyFailed) else
                         "server" if isinstance(exc, _ServerFailed) else "request")
        await self.connection.send(openpi.error_text(exc))
        await self.connection.close(openpi.CLOSE_INTERNAL_ERROR,
                                    "Internal server error. Traceback included in previous frame.")


class _VlaEvalSession(_Session):
    """vla-eval's wire (:mod:`workbench.wires.vla_eval`)."""

    async def run(self) -> None:
        while True:
            frame = await self.recv()
            try:
                message = vla_eval.decode(frame if isinstance(frame, bytes) else b"",
                                          self.server.options.max_frame_bytes)
            except WireError as exc:
                self.count_error("request")
                await self.send("error", {"error": f"bad_message: {exc}"}, 0)
                continue
            await self.dispatch(message)

    async def dispatch(self, message: dict[str, Any]) -> None:
        kind, payload, seq = message["type"], message["payload"], message["seq"]
        if kind == "hello":
            server = self.server
            assert server.preset is not None
            switches = server.preset.switches(server.policy.capabilities.features)
            await self.send("hello", vla_eval.hello_payload(
                model_server=f"workbench:{server.policy.name}", capabilities={},
                workbench=server.metadata,
                **({"observation_params": switches} if switches else {})), seq)
        elif kind == "episode_start":
            await self.guarded("episode_start_failed", seq, self._start_episode(payload))
        elif kind == "observation":
            await self.guarded("observation_failed", seq, self._observe(payload, seq))
        elif kind == "episode_end":
            await self.end()
        elif kind == "error":
            log.warning("client reported an error: %.200s", payload)

    async def guarded(self, label: str, seq: int, work: Any) -> None:
        """Run ``work``; a failure answers this message alone, as vla-eval's server does."""
        try:
            await work
        except (_Refused, ContractError) as exc:
            self.count_error("request")
            await self.send("error", {"error": f"{label}: {exc}"}, seq)
        except (_PolicyFailed, _ServerFailed) as exc:
            self.count_error("policy" if isinstance(exc, _PolicyFailed) else "server")
            await self.send("error", {"error": f"{label}: {native.one_line(str(exc))}"}, seq)

    async def _start_episode(self, payload: Mapping[str, Any]) -> None:
        task = payload.get("task") if isinstance(payload.get("task"), Mapping) else {}
        name = task.get("name", "")
        instruction = task.get("instruction", task.get("description", name))
        seed = task.get("seed", 0)
        await self.start(str(name), str(instruction), seed if isinstance(seed, int) else 0)

    async def _observe(self, payload: Mapping[str, Any], seq: int) -> None:
        server = self.server
        assert server.preset is not None
        features = server.preset.observation(payload, server.protocol.name,
                                             server.policy.capabilities.features)
        if self.episode is None:
            await self.start("", features.get("instruction", ""))
        if not self.chunk:
            chunk, _ = await self.act(features)
            self.chunk.extend(chunk)
        await self.send("action", {"actions": self.chunk.popleft()}, seq)

    async def send(self, kind: str, payload: dict[str, Any], seq: int) -> None:
        await self.connection.send(vla_eval.encode(vla_eval.envelope(kind, payload, seq),
                                                   image_format="raw"))


SESSIONS: dict[str, Callable[..., _Session]] = {
    "workbench": _NativeSession, "openpi": _OpenpiSession, "vla-eval": _VlaEvalSession}


def _text(message: Mapping[str, Any], key: str) -> str:
    value = message.get(key, "")
    if not isinstance(value, str):
        raise _Refused(f"{key}: expected a string; got {type(value).__name__}")
    return value


def build_policy_server(ref: Any, options: Mapping[str, Any] | None = None,
                        protocol: str | None = None,
                        serve_options: ServeOptions = ServeOptions()) -> PolicyServer:
    """A :class:`PolicyServer` for the policy ``ref`` names (as
    :func:`workbench.policies.make_policy` builds it, with constructor ``options``)."""
    factory = policy_factory(ref, options, protocol)  # an unknown name or option: raised
    return PolicyServer(build_policy(factory, ref, options or {}), serve_options)


def server_url(host: str, port: int) -> str:
    """``ws://host:port`` (an IPv6 host in brackets).

    >>> server_url("127.0.0.1", 8000), server_url("::1", 8000)
    ('ws://127.0.0.1:8000', 'ws://[::1]:8000')
    """
    return f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}"


class ServedPolicy:
    """A :class:`PolicyServer` running on its own event loop in a background thread;
    ``url`` and ``port`` say where. Close it (or use it in ``with``) when done."""

    def __init__(self, server: PolicyServer, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server, self.host = server, host
        self._loop = asyncio.new_event_loop()
        self._runner = threading.Thread(target=self._loop.run_forever, name="policy-server",
                                        daemon=True)
        self._runner.start()
        try:
            self.port = self._wait(server.start(host, port))
        except BaseException:
            self._halt()
            raise
        self._closed = False

    @property
    def url(self) -> str:
        return server_url(self.host, self.port)

    def stats(self) -> dict[str, Any]:
        return self.server.stats()

    def close(self) -> None:
        """Stop serving, end open episodes and unload the policy (idempotent)."""
        if not self._closed:
            self._closed = True
            try:
                self._wait(self.server.stop())
            finally:
                self._halt()

    def _wait(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _halt(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._runner.join()
        self._loop.close()

    def __enter__(self) -> "ServedPolicy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def serve_policy(ref: Any, options: Mapping[str, Any] | None = None,
                 protocol: str | None = None, host: str = "127.0.0.1", port: int = 0,
                 **serve_options: Any) -> ServedPolicy:
    """Serve the policy ``ref`` names in a background thread; returns once it listens.
    ``serve_options``: fields of :class:`ServeOptions` (``wire``, ``max_batch``, ...).

    >>> with serve_policy("zero", protocol="metaworld-v1") as served:
    ...     served.url.startswith("ws://127.0.0.1:")
    True
    """
    return ServedPolicy(build_policy_server(ref, options, protocol,
                                            ServeOptions(**serve_options)), host, port)


def run_policy_server(args: argparse.Namespace) -> int:
    """Serve ``args.policy`` (with ``args.options``, ``args.protocol`` and the serving
    options present on ``args``) on ``args.host``:``args.port`` until SIGINT or SIGTERM,
    printing its URL; returns 0."""
    names = {f for f in ServeOptions.__dataclass_fields__}
    chosen = {k: v for k, v in vars(args).items() if k in names and v is not None}
    server = build_policy_server(args.policy, args.options, args.protocol,
                                 ServeOptions(**chosen))
    port = args.port or 0
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port: expected an integer from 0 to 65535; got {args.port!r}")
    try:
        asyncio.run(_serve_until_stopped(server, args.host or "127.0.0.1", port))
    except KeyboardInterrupt:
        pass
    return 0


async def _serve_until_stopped(server: PolicyServer, host: str, port: int) -> None:
    stopped = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            asyncio.get_running_loop().add_signal_handler(sig, stopped.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread, or a platform without signal handlers
    try:
        port = await server.start(host, port)
    except OSError as exc:
        raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    print(f"serving policy {server.metadata['policy']} ({server.protocol.name}) on the "
          f"{server.options.wire} wire at {server_url(host, port)}", flush=True)
    try:
        await stopped.wait()
    finally:
        await server.stop()
