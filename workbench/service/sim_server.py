"""The SIM service: a benchmark served over WebSocket, protocol ``workbench.sim-server/v2``.

The benchmark side owns the environments, the fixed schedule of cases and the scores;
the policy side gets declared public features only. Frames are msgpack maps
(:mod:`workbench.contracts.wire`; arrays as typed dicts of bool, int, uint or float,
never pickle). Every request carries ``type`` and ``seq``; replies echo ``seq``.
The whole protocol is docs/sim-wire.md.

Only whom the service gave a key is served. The operator's (the driver's) connection
joins with the admin ``token``; it runs no episodes, it hands out tickets, each for one
case, and reads scores. A session runs on a connection that joined with a ticket, which
it consumes; a hello with neither is refused and closed. Requests and replies:

- ``hello {protocol, token | ticket}`` -> ``welcome {protocol, benchmark, suite, spec,
  schedule, admin, case, limits}`` (``schedule`` on admin connections, ``case`` on a
  ticket's). First and once per connection; ``spec`` holds the public observation
  features (name, dtype, shape) and the action (dim, dtype, low, high).
- Admin ``ticket {case, retry?}`` -> ``ticket {case, ticket}``: the key to one session
  of ``case``, refused for a case already attempted unless ``retry`` and the case was
  abandoned or failed (``error``). A new ticket for a case voids its earlier one.
- ``start {features, case?}`` -> ``started {case, task, instruction, spec, step,
  max_steps, observation}``: the ticket's one session (episode).
- ``step {action, observe?}`` -> ``ack {step, done, observation?}`` when executed, or
  ``rejected {message, rejections, done}`` when the action breaks the declared contract
  (wrong shape or dtype, out of range, not finite): not executed, the simulator does not
  advance. ``done`` is the protocol's public termination only (the step limit, the
  benchmark's own end without success, the refusal limit): success is never on the
  public channel; the session goes on past it until the step limit or ``end``.
- ``observe {}`` -> ``observation {step, observation}`` (no step).
- ``end {}`` -> ``ended {step}``: the session's holder stops the episode (the driver
  ends it when the admin ``score`` shows success).
- Admin: ``status`` -> every case's state; ``score {case}`` -> success, terminal step,
  steps, rejections, termination; ``export`` -> every case's score; ``artifacts`` ->
  manifest of files (name, case, size, sha256); ``artifact {name, offset, length}`` ->
  a chunk of at most :data:`CHUNK_BYTES`.

Case states and artifacts persist in SQLite (``state_path``,
:mod:`workbench.service.sim_state`), committed before each claim and finish is
answered: a restarted service refuses what it already ran.

Errors come in place of a reply: ``error {code, message}`` with a bounded message and
never a traceback. A request whose ``seq`` is not the next one is refused (``sequence``)
and never executed, so a lost reply is never replayed. A frame over ``max_frame_bytes``
closes the connection (WebSocket 1009). The server binds 127.0.0.1 unless told
otherwise; the simulator runs on slot threads, off the event loop; one connection's
faults never touch another's session. Observations never carry rewards, success,
scores or privileged features.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import websockets
from websockets.asyncio.server import ServerConnection, serve

from workbench.benchmarks.base import BenchmarkAdapter
from workbench.config import check_float, check_int
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.protocols import ContractError, Protocol, validate_action
from workbench.contracts.registry import Factory
from workbench.contracts.wire import MAX_FRAME_BYTES, WireError, decode, encode
from workbench.records.media import episode_filename, write_video
from workbench.runtime.episode import EpisodeStepper, VideoRecorder, video_feature
from workbench.service.sim_state import ServiceState

PROTOCOL = "workbench.sim-server/v2"
CHUNK_BYTES = 256 * 1024
MESSAGE_CHARS = 300
MAX_REJECTIONS = 100
MAX_SCHEDULE = 100_000
"""Cases per task when the benchmark declares no number of initial states."""
"""Refused actions per session before the session ends as the policy's failure."""


def public_spec(protocol: Protocol, max_steps: int) -> dict[str, Any]:
    """The declared interface the policy side may see (no privileged features)."""
    low, high = protocol.action.bounds()
    return {
        "protocol": protocol.name,
        "observation": [{"name": f.name, "dtype": f.dtype,
                         "shape": [-1 if d is None else d for d in f.shape],
                         "meaning": f.meaning} for f in protocol.features],
        "action": {"dim": protocol.action.dim, "dtype": protocol.action.dtype,
                   "low": low.tolist(), "high": high.tolist(),
                   "meaning": protocol.action.meaning},
        "max_steps": max_steps,
    }


class _Refusal(Exception):
    """A request answered with ``error {code, message}``."""

    def __init__(self, code: str, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.code, self.close = code, close


@dataclass
class CaseState:
    """What the server knows of one scheduled case (admin only)."""

    spec: EpisodeSpec
    state: str = "unattempted"  # running, done, abandoned, error
    success: bool | None = None
    terminal_step: int | None = None
    steps: int = 0
    rejections: int = 0
    termination: str | None = None
    attempts: int = 0
    message: str | None = None

    def public(self) -> dict[str, Any]:
        return {"case": self.spec.episode_id, "state": self.state, "attempts": self.attempts}

    def stored(self) -> dict[str, Any]:
        return {"state": self.state, "attempts": self.attempts, "success": self.success,
                "terminal_step": self.terminal_step, "steps": self.steps,
                "rejections": self.rejections, "termination": self.termination,
                "message": self.message}

    def score(self) -> dict[str, Any]:
        return {**self.public(), "success": self.success, "terminal_step": self.terminal_step,
                "steps": self.steps, "rejections": self.rejections,
                "termination": self.termination, "message": self.message}


class _Slot:
    """One adapter on one thread: every call to it runs on that thread."""

    def __init__(self, index: int, factory: Factory) -> None:
        self.index, self.factory = index, factory
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"sim-slot-{index}")
        self.adapter: BenchmarkAdapter | None = None

    def get(self) -> BenchmarkAdapter:  # on the slot's thread
        if self.adapter is None:
            self.adapter = self.factory()
        return self.adapter

    def close(self) -> None:
        def shut() -> None:
            if self.adapter is not None:
                self.adapter.close()
        self.executor.submit(shut).result()
        self.executor.shutdown()


@dataclass
class _Session:
    case: CaseState
    slot: _Slot
    features: tuple[str, ...]
    stepper: EpisodeStepper | None = None
    video: VideoRecorder | None = None
    done: bool = False


@dataclass
class _Connection:
    expected: int = 0
    joined: bool = False
    admin: bool = False
    ticket: "_Ticket | None" = None
    session: _Session | None = None


@dataclass(frozen=True)
class _Ticket:
    case: str
    retry: bool


@dataclass
class SimService:
    """A benchmark's cases served on ``host:port`` (see the module docstring).

    adapter_factory builds one adapter per slot (``slots`` sessions run at once);
    schedule: the fixed, ordered cases; token: the admin secret (generated when None);
    artifacts_dir: where episode videos go when ``video``; idle_timeout_s: a connection
    that is not the admin's, silent this long, is closed (its session abandoned);
    state_path: the SQLite file of case states (None: kept in memory only);
    definition: what makes the service's cases what they are (hashed into the state
    file, so a file is never reused for another schedule).
    """

    adapter_factory: Factory
    schedule: Sequence[EpisodeSpec]
    protocol: Protocol
    benchmark: str
    suite: str
    max_steps: int
    token: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    slots: int = 1
    max_frame_bytes: int = MAX_FRAME_BYTES
    video: bool = False
    artifacts_dir: str | None = None
    idle_timeout_s: float = 300.0
    state_path: str | None = None
    definition: dict[str, Any] | None = None
    cases: dict[str, CaseState] = field(init=False)

    def __post_init__(self) -> None:
        check_int("port", self.port, 0, 65535)
        check_int("slots", self.slots, 1, 256)
        check_float("idle_timeout_s", self.idle_timeout_s, 0.001, 86400.0)
        check_int("max_frame_bytes", self.max_frame_bytes, 1024, 2**31 - 1)
        if self.token is not None and (not isinstance(self.token, str) or
                                       not 16 <= len(self.token) <= 4096):
            raise ValueError("the admin token must be a string of 16 to 4096 characters")
        self.token = self.token or secrets.token_hex(16)
        self.cases = {s.episode_id: CaseState(s) for s in self.schedule}
        self._free: asyncio.Queue | None = None
        self._slots = [_Slot(i, self.adapter_factory) for i in range(self.slots)]
        self._artifacts: dict[str, dict[str, Any]] = {}
        self._tickets: dict[str, _Ticket] = {}
        self._ticket_of: dict[str, str] = {}  # case -> its one valid ticket
        self.state: ServiceState | None = None
        if self.state_path is not None:
            self.state = ServiceState(self.state_path, self.definition or self._definition())
            stored, artifacts = self.state.load()
            for case_id, fields in stored.items():
                if case_id in self.cases:
                    for key, value in fields.items():
                        setattr(self.cases[case_id], key, value)
            self._artifacts = {a["name"]: a for a in artifacts}
        if self.welcome_bytes() > self.max_frame_bytes:
            raise ValueError(f"a schedule of {len(self.schedule)} cases does not fit the "
                             f"welcome frame ({self.welcome_bytes()} bytes > max_frame_bytes "
                             f"{self.max_frame_bytes}); serve fewer tasks or episodes")
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.sessions_served = 0

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def _definition(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "suite": self.suite, "max_steps": self.max_steps,
                "protocol": self.protocol.name, "cases": len(self.schedule),
                "schedule": [s.episode_id for s in self.schedule]}

    def _save(self, case: CaseState) -> None:
        """Commit ``case``'s state before the request that changed it is answered."""
        if self.state is not None:
            self.state.save(case.spec.episode_id, case.stored())

    # -- lifecycle ------------------------------------------------------------------
    async def serve_forever(self, ready: threading.Event | None = None) -> None:
        """Serve until :meth:`close` (or the task is cancelled)."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._free = asyncio.Queue()
        for slot in self._slots:
            self._free.put_nowait(slot)
        async with serve(self._handle, self.host, self.port, max_size=self.max_frame_bytes,
                         ping_interval=None) as server:
            self.port = server.sockets[0].getsockname()[1]
            (ready or self._ready).set()
            await self._stop.wait()
        for slot in self._slots:
            await asyncio.get_running_loop().run_in_executor(None, slot.close)
        if self.state is not None:
            self.state.close()

    def start(self) -> "SimService":
        """Serve on a background thread; returns once listening."""
        def main() -> None:
            try:
                asyncio.run(self.serve_forever())
            except BaseException as exc:  # surfaced by start()
                self._error = exc
                self._ready.set()
        self._thread = threading.Thread(target=main, daemon=True, name="sim-service")
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None:
            raise self._error
        return self

    def close(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)

    def __enter__(self) -> "SimService":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- one connection -----------------------------------------------------------------
    async def _handle(self, ws: ServerConnection) -> None:
        conn = _Connection()
        try:
            while True:
                try:  # a silent client must not hold a slot (or a socket) forever
                    frame = await asyncio.wait_for(
                        ws.recv(), None if conn.admin else self.idle_timeout_s)
                except asyncio.TimeoutError:
                    await ws.close(1008, "idle")
                    break
                reply, close = await self._answer(conn, frame)
                await ws.send(encode(reply))
                if close:
                    await ws.close(1008, reply.get("code", "policy violation")[:100])
                    break
        except websockets.ConnectionClosed:
            pass
        finally:
            if conn.session is not None and not conn.session.done:
                await self._finish(conn, "abandoned", "connection closed mid-episode")

    async def _answer(self, conn: _Connection, frame: Any) -> tuple[dict[str, Any], bool]:
        seq = None
        try:
            try:
                message = decode(frame, self.max_frame_bytes)
            except WireError as exc:
                raise _Refusal("malformed", str(exc)) from None
            if not isinstance(message, dict):
                raise _Refusal("malformed", "a request is a map with 'type' and 'seq'")
            seq, kind = message.get("seq"), message.get("type")
            if isinstance(seq, bool) or not isinstance(seq, int):
                seq = None
                raise _Refusal("malformed", "a request needs an integer 'seq'")
            if seq != conn.expected:
                raise _Refusal("sequence", f"expected seq {conn.expected}; got {seq}; "
                               "requests are never replayed")
            conn.expected += 1
            handler = self._HANDLERS.get(kind) if isinstance(kind, str) else None
            if handler is None:
                known = sorted(self._HANDLERS if conn.admin else set(self._HANDLERS) -
                               self._ADMIN)
                raise _Refusal("unknown_type", f"unknown request type {_echo(kind, 40)}; "
                               f"known: {known}")
            if kind != "hello" and not conn.joined:
                raise _Refusal("not_joined", f"{kind} before hello")
            if kind in self._ADMIN and not conn.admin:
                raise _Refusal("unauthorized", f"{kind} needs the admin token")
            reply = await handler(self, conn, message)
            return {**reply, "seq": seq}, False
        except _Refusal as exc:
            return {"type": "error", "seq": seq, "code": exc.code,
                    "message": str(exc)[:MESSAGE_CHARS]}, exc.close

    # -- requests ---------------------------------------------------------------------
    async def _hello(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        if conn.joined:
            raise _Refusal("joined", "hello was already received on this connection")
        protocol = message.get("protocol")
        if not isinstance(protocol, str) or protocol != PROTOCOL:
            raise _Refusal("protocol", f"this server speaks {PROTOCOL}, not "
                           f"{_echo(protocol, 60)}", close=True)
        token, ticket = message.get("token"), message.get("ticket")
        if (token is None) == (ticket is None):
            raise _Refusal("unauthorized", "hello needs the admin token or a ticket (one "
                           "of them)", close=True)
        if token is not None:
            if not isinstance(token, str) or \
                    not secrets.compare_digest(token.encode(), self.token.encode()):
                raise _Refusal("unauthorized", "wrong admin token", close=True)
            conn.admin = True
        else:
            held = self._tickets.pop(ticket, None) if isinstance(ticket, str) else None
            if held is None:
                raise _Refusal("unauthorized", "unknown, used or void ticket", close=True)
            self._ticket_of.pop(held.case, None)
            conn.ticket = held
        conn.joined = True
        return self._welcome(conn)

    def _welcome(self, conn: _Connection) -> dict[str, Any]:
        return {"type": "welcome", "protocol": PROTOCOL, "benchmark": self.benchmark,
                "suite": self.suite, "spec": public_spec(self.protocol, self.max_steps),
                "schedule": [s.episode_id for s in self.schedule] if conn.admin else [],
                "admin": conn.admin, "case": conn.ticket.case if conn.ticket else None,
                "limits": {"max_frame_bytes": self.max_frame_bytes,
                           "max_rejections": MAX_REJECTIONS, "chunk_bytes": CHUNK_BYTES}}

    def welcome_bytes(self) -> int:
        """Size of the admin welcome frame (it lists the whole schedule)."""
        return len(encode(self._welcome(_Connection(admin=True)) | {"seq": 0}))

    async def _ticket(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        case = self._case(message)
        retry = message.get("retry", False)
        if not isinstance(retry, bool):
            raise _Refusal("malformed", "retry must be true or false")
        if case.state != "unattempted" and not (retry and case.state in ("abandoned",
                                                                          "error")):
            raise _Refusal("attempted", f"case {case.spec.episode_id} was already attempted "
                           f"({case.state}); only an abandoned or failed case is retried")
        if case.state == "unattempted" and retry:
            raise _Refusal("attempted", f"case {case.spec.episode_id} was never attempted; "
                           "a retry is for an abandoned or failed case")
        old = self._ticket_of.pop(case.spec.episode_id, None)
        self._tickets.pop(old, None)
        key = secrets.token_urlsafe(24)
        self._tickets[key] = _Ticket(case.spec.episode_id, retry)
        self._ticket_of[case.spec.episode_id] = key
        return {"type": "ticket", "case": case.spec.episode_id, "ticket": key}

    def _case(self, message: dict[str, Any]) -> CaseState:
        case = self.cases.get(message.get("case")) if isinstance(message.get("case"), str) \
            else None
        if case is None:
            raise _Refusal("unknown_case", f"{_echo(message.get('case'), 120)} is not in "
                           "this server's schedule")
        return case

    async def _start(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        if conn.admin:
            raise _Refusal("unauthorized", "the admin connection runs no sessions: ask for "
                           "a ticket and start the case on a connection that joins with it")
        if conn.session is not None and not conn.session.done:
            raise _Refusal("session_active", "a session is running on this connection; "
                           "end it first")
        assert conn.ticket is not None
        if conn.session is not None:
            raise _Refusal("attempted", f"this connection's ticket ran case "
                           f"{conn.ticket.case}; a ticket runs one session")
        if message.get("case", conn.ticket.case) != conn.ticket.case:
            raise _Refusal("wrong_case", f"this connection's ticket is for case "
                           f"{conn.ticket.case}, not {_echo(message.get('case'), 120)}")
        case = self.cases[conn.ticket.case]
        features = message.get("features")
        public = set(self.protocol.feature_names)
        if not isinstance(features, list) or not features or \
                not all(isinstance(f, str) and f in public for f in features):
            raise _Refusal("features", f"features must be a non-empty list of declared "
                           f"public features: {sorted(public)}")
        if case.state != "unattempted" and not (conn.ticket.retry and
                                                 case.state in ("abandoned", "error")):
            raise _Refusal("attempted", f"case {case.spec.episode_id} was already "
                           f"attempted ({case.state}); cases run once")
        assert self._free is not None
        try:
            slot = await asyncio.wait_for(self._free.get(), timeout=120)
        except asyncio.TimeoutError:
            raise _Refusal("busy", "no simulator slot came free within 120 s") from None
        before = case.stored()
        case.state, case.attempts = "running", case.attempts + 1
        case.success = case.terminal_step = case.termination = case.message = None
        case.steps = case.rejections = 0
        try:
            self._save(case)  # claimed on disk before anything runs
        except Exception as exc:
            for key, value in before.items():
                setattr(case, key, value)
            self._free.put_nowait(slot)
            raise _Refusal("unavailable", f"the service cannot record the claim: "
                           f"{_describe(exc)}") from None
        session = _Session(case, slot, tuple(features))
        conn.session = session
        try:
            obs, instruction = await self._on_slot(slot, self._reset, session)
        except Exception as exc:
            await self._finish(conn, "error", f"reset: {_describe(exc)}")
            raise _Refusal("simulator", f"reset failed: {_describe(exc)}") from None
        self.sessions_served += 1
        return {"type": "started", "case": case.spec.episode_id, "task": case.spec.task,
                "instruction": instruction, "spec": public_spec(self.protocol, self.max_steps),
                "step": 0, "max_steps": self.max_steps, "observation": obs}

    def _reset(self, adapter: BenchmarkAdapter, session: _Session) -> tuple[dict, str]:
        observers = []
        if self.video:
            session.video = VideoRecorder(video_feature(adapter))
            observers.append(session.video)
        session.stepper = EpisodeStepper(adapter, session.case.spec, observers)
        session.stepper.reset()
        return _public(session.stepper.read(session.features)), \
            adapter.instruction(session.case.spec.task)

    async def _step(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        session = self._active(conn)
        try:
            action = validate_action(self.protocol, message.get("action"))
            if action.shape[0] != 1:
                raise ContractError(f"{self.protocol.name}: action: one control per step "
                                    f"request; got a chunk of {action.shape[0]}")
        except ContractError as exc:
            session.case.rejections += 1
            ended = session.case.rejections >= MAX_REJECTIONS
            if ended:
                await self._finish(conn, "done", f"{MAX_REJECTIONS} actions refused",
                                   termination="rejections")
            return {"type": "rejected", "message": str(exc)[:MESSAGE_CHARS],
                    "rejections": session.case.rejections, "done": ended}
        observe = message.get("observe", True) is not False
        try:
            result, obs = await self._on_slot(session.slot, self._apply, session, action[0],
                                              observe)
        except Exception as exc:
            await self._finish(conn, "error", f"step: {_describe(exc)}")
            raise _Refusal("simulator", f"step failed: {_describe(exc)}") from None
        steps = session.stepper.steps
        if result.success and session.case.terminal_step is None:
            session.case.terminal_step = steps  # known to the admin; never said here
        # the public termination only: success (and a native end that is success) is not
        done = steps >= self.max_steps or (result.done and not result.success)
        if done:
            await self._finish(conn, "done", None, termination="step_limit"
                               if steps >= self.max_steps else "native_end")
        reply = {"type": "ack", "step": steps, "done": done}
        if obs is not None:
            reply["observation"] = obs
        return reply

    def _apply(self, adapter: BenchmarkAdapter, session: _Session, action: np.ndarray,
               observe: bool) -> tuple[Any, dict | None]:
        result = session.stepper.apply(action)
        return result, _public(session.stepper.read(session.features)) if observe else None

    async def _observe(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        session = self._active(conn)
        try:
            obs = await self._on_slot(session.slot, lambda a, s: _public(
                s.stepper.read(s.features)), session)
        except Exception as exc:
            await self._finish(conn, "error", f"observe: {_describe(exc)}")
            raise _Refusal("simulator", f"observation failed: {_describe(exc)}") from None
        return {"type": "observation", "step": session.stepper.steps, "observation": obs}

    async def _end(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        session = self._active(conn)
        await self._finish(conn, "done", None, termination="policy_stop")
        return {"type": "ended", "step": session.stepper.steps}

    async def _status(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        return {"type": "status", "cases": [c.public() for c in self.cases.values()]}

    async def _export(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        return {"type": "export", "protocol": PROTOCOL, "benchmark": self.benchmark,
                "suite": self.suite, "cases": [c.score() for c in self.cases.values()]}

    async def _score(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        return {"type": "score", **self._case(message).score()}

    async def _list_artifacts(self, conn: _Connection, message: dict[str, Any]) -> dict:
        return {"type": "artifacts",
                "artifacts": [{k: v for k, v in a.items() if k != "path"}
                              for a in self._artifacts.values()]}

    async def _artifact(self, conn: _Connection, message: dict[str, Any]) -> dict[str, Any]:
        entry = self._artifacts.get(message.get("name")) \
            if isinstance(message.get("name"), str) else None
        offset, length = message.get("offset"), message.get("length", CHUNK_BYTES)
        if entry is None:
            raise _Refusal("unknown_artifact", "no such artifact in the manifest")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                   for v in (offset, length)) or offset > entry["size"]:
            raise _Refusal("malformed", "offset and length must be integers >= 0, offset at "
                           "most the artifact's size")
        try:
            with open(entry["path"], "rb") as f:
                f.seek(offset)
                data = f.read(min(length, CHUNK_BYTES))
        except OSError as exc:
            raise _Refusal("unavailable", f"artifact {entry['name']} cannot be read "
                           f"({type(exc).__name__})") from None
        return {"type": "artifact", "name": entry["name"], "offset": offset, "data": data}

    # -- helpers ----------------------------------------------------------------------
    def _active(self, conn: _Connection) -> _Session:
        if conn.session is None or conn.session.done:
            raise _Refusal("no_session", "no running session on this connection; start one")
        return conn.session

    async def _on_slot(self, slot: _Slot, fn: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(slot.executor, lambda: fn(slot.get(), *args))

    async def _finish(self, conn: _Connection, state: str, message: str | None,
                      termination: str | None = None) -> None:
        """Close the connection's session: record its case, keep its video, free its slot.
        A success the session reached stands, whatever ended it after; a session ended
        right after its success (the driver's ``end``) terminates as ``success``."""
        session = conn.session
        if session is None or session.done:
            return
        session.done = True
        case = session.case
        case.state, case.message = state, message
        case.success = case.terminal_step is not None
        case.steps = session.stepper.steps if session.stepper is not None else 0
        case.termination = "success" if case.success and termination == "policy_stop" and \
            case.steps == case.terminal_step else termination or state
        if session.video is not None and session.video.frames and self.artifacts_dir:
            try:
                await self._on_slot(session.slot, self._keep_video, session)
            except Exception as exc:  # a lost video never changes the score
                case.message = f"{message or ''} video not written: {_describe(exc)}".strip()
        try:
            self._save(case)
        except Exception as exc:  # the outcome stays in memory; the operator is told
            case.message = f"{case.message or ''} not saved: {_describe(exc)}".strip()
        assert self._free is not None
        self._free.put_nowait(session.slot)

    def _keep_video(self, adapter: BenchmarkAdapter, session: _Session) -> None:
        name = episode_filename(session.case.spec.episode_id) + ".mp4"
        path = write_video(Path(self.artifacts_dir) / name, session.video.frames)
        data = Path(path).read_bytes()
        self._artifacts[name] = {"name": name, "case": session.case.spec.episode_id,
                                 "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                 "path": str(path)}
        if self.state is not None:
            self.state.keep_artifacts([self._artifacts[name]])

    _HANDLERS = {"hello": _hello, "start": _start, "step": _step, "observe": _observe,
                 "end": _end, "status": _status, "score": _score, "export": _export,
                 "artifacts": _list_artifacts, "artifact": _artifact, "ticket": _ticket}
    _ADMIN = frozenset({"status", "score", "export", "artifacts", "artifact", "ticket"})


def _public(observation: dict[str, Any]) -> dict[str, Any]:
    """The declared features only (the stepper's bookkeeping keys dropped)."""
    return {k: v for k, v in observation.items() if k not in ("episode_id", "step")}


def _echo(value: Any, limit: int) -> str:
    """A client's value quoted in an error message: a string cut to ``limit``, anything
    else by its type only (the repr of a deeply nested value would overflow the stack)."""
    return repr(value[:limit]) if isinstance(value, str) else f"a {type(value).__name__}"


def _describe(exc: BaseException) -> str:
    """``Type: message``, bounded; never a traceback."""
    return f"{type(exc).__name__}: {exc}"[:200]


def build_service(benchmark: str, suite: str, tasks: Sequence[str] | None = None,
                  episodes: int = 1, seed: int = 0, image_size: int = 224,
                  max_steps: int | None = None, benchmark_options: dict | None = None,
                  **options: Any) -> SimService:
    """A :class:`SimService` for a registered benchmark (or an adapter's import path):
    its schedule is ``episodes`` cases per task of ``suite`` (all tasks unless
    ``tasks``), in canonical order; ``options`` go to :class:`SimService`."""
    from workbench.benchmarks import benchmark_class, benchmark_factory
    from workbench.contracts.plan import plan_episodes

    adapter_cls = benchmark_class(benchmark)
    check_int("episodes", episodes, 1, adapter_cls.initial_states or MAX_SCHEDULE)
    check_int("seed", seed, 0, 2**32 - 1)
    check_int("image_size", image_size, 1, 2048)
    check_int("max_steps", max_steps, 1, optional=True)
    names = list(tasks) if tasks else adapter_cls.suite_tasks(suite)
    unknown = [t for t in names if t not in adapter_cls.suite_tasks(suite)]
    if unknown:
        raise ValueError(f"tasks {unknown} are not tasks of suite {suite!r}")
    schedule = sorted(plan_episodes(adapter_cls.name, suite, names, episodes))
    factory = benchmark_factory(benchmark, suite=suite, seed=seed, image_size=image_size,
                                **(benchmark_options or {}))
    limit = adapter_cls.max_steps if max_steps is None else min(max_steps,
                                                                 adapter_cls.max_steps)
    definition = {"benchmark": adapter_cls.name, "suite": suite, "seed": seed,
                  "image_size": image_size, "max_steps": limit, "cases": len(schedule),
                  "benchmark_options": benchmark_options or {},
                  "schedule": [s.episode_id for s in schedule]}
    return SimService(factory, schedule, adapter_cls.protocol, adapter_cls.name, suite, limit,
                      definition=definition, **options)
