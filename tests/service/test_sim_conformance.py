"""The SIM service against dm_env_rpc's compliance list, over real loopback sockets.

Each bad input gets its exact reply (``rejected``, or ``error`` with its code), the
simulator does not advance (the step of a later ``observe`` is unchanged, the case's
refusals counted when an action is refused), and afterwards another connection still
completes a normal session (checked when each test ends, by :class:`Sim`). Every reply
is checked by the raw client (``wire_kit.Wire``, in conftest) for tracebacks, source
paths and, off admin connections, scores and privileged features.
"""

import hashlib
import math
import time
from pathlib import Path
from typing import Any, Iterator

import msgpack
import numpy as np
import pytest

from workbench.contracts.rendering import use_headless_rendering
from workbench.contracts.wire import encode
from workbench.service import sim_server
from workbench.service.sim_client import ArtifactMismatch, ServiceError, SimClient
from workbench.service.sim_server import MAX_REJECTIONS, MESSAGE_CHARS, PROTOCOL, build_service

SUITE, TASKS = "MT10", ("pick-place-v3", "push-v3", "reach-v3", "window-open-v3", "door-open-v3",
                        "drawer-close-v3")
MAX_STEPS = 30
FRAME_LIMIT = 64 * 1024
VIDEO_STEPS = 8
"""The video service's budget (every control there renders a frame: ~0.1 s on CPU)."""
VIDEO_CHUNK = 512
"""A chunk far below the server's default, so a short video comes in several chunks."""
PUBLIC = ["images.primary", "images.wrist", "state", "instruction"]
ZERO = np.zeros(4, np.float32)


@pytest.fixture(scope="module")
def service() -> Iterator[sim_server.SimService]:
    use_headless_rendering()
    svc = build_service("metaworld", SUITE, tasks=TASKS, episodes=50, image_size=32,
                        max_steps=MAX_STEPS, max_frame_bytes=FRAME_LIMIT).start()
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def video_service(tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[sim_server.SimService]:
    use_headless_rendering()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim_server, "CHUNK_BYTES", VIDEO_CHUNK)
        svc = build_service("metaworld", "MT1:reach-v3", episodes=12, image_size=32,
                            max_steps=VIDEO_STEPS, video=True,
                            artifacts_dir=str(tmp_path_factory.mktemp("artifacts"))).start()
        yield svc
        svc.close()


class Sim:
    """Sessions of one service: each test's fresh cases, snapshots, and the check that
    the service still serves a normal session once the test's connections are closed."""

    def __init__(self, service: sim_server.SimService, cases: Iterator[str], kit: Any) -> None:
        self.service, self.cases, self.kit = service, cases, kit
        self.opened: list[Any] = []

    def connect(self) -> Any:
        """A raw connection (``kit.Wire``), not joined."""
        self.opened.append(self.kit.Wire(self.service.url))
        return self.opened[-1]

    def ticket(self, case: str | None = None, retry: bool = False) -> str:
        """A ticket for ``case`` (default: a fresh one), from the admin."""
        return self.kit.take_ticket(self.service.url, self.service.token,
                                    case or next(self.cases), retry)

    def join(self, admin: bool = False, case: str | None = None) -> Any:
        """A connection joined as the admin, or with a ticket for ``case`` (default: a
        fresh case; ``wire.case`` says which)."""
        wire = self.connect()
        if admin:
            wire.hello(self.service.token)
        else:
            wire.hello(ticket=self.ticket(case))
        return wire

    def start(self, features: tuple[str, ...] = ("state",)) -> tuple[Any, str]:
        """A ticket's connection running a session of a fresh case."""
        wire = self.join()
        reply = wire.request("start", case=wire.case, features=list(features))
        assert reply["type"] == "started" and reply["step"] == 0, reply
        return wire, wire.case

    def score(self, case: str) -> dict[str, Any]:
        admin = self.join(admin=True)
        reply = admin.request("score", case=case)
        admin.close()
        assert reply["type"] == "score", reply
        return reply

    def snapshot(self, wire: Any, case: str) -> tuple[int, np.ndarray, int]:
        """(step, public state, refused actions) of the session running on ``wire``."""
        reply = wire.request("observe")
        assert reply["type"] == "observation", reply
        return reply["step"], reply["observation"]["state"], self.score(case)["rejections"]

    def assert_not_advanced(self, wire: Any, case: str, before: tuple, refused: int) -> None:
        step, state, rejections = self.snapshot(wire, case)
        assert step == before[0]
        np.testing.assert_array_equal(state, before[1])
        assert rejections == before[2] + refused

    def run_to_done(self, wire: Any) -> list[dict[str, Any]]:
        """Step ZERO until ``done``; every ack numbered in turn."""
        acks = []
        for step in range(1, self.service.max_steps + 1):
            acks.append(wire.request("step", action=ZERO, observe=False))
            assert acks[-1]["type"] == "ack" and acks[-1]["step"] == step, acks[-1]
            if acks[-1]["done"]:
                return acks
        raise AssertionError(f"no done within the budget of {self.service.max_steps} steps")

    def assert_serves(self) -> None:
        """A fresh connection completes a normal session, scored as the server sees it."""
        wire, case = self.start()
        acks = self.run_to_done(wire)
        score = self.score(case)
        assert (score["state"], score["steps"], score["rejections"]) == \
            ("done", acks[-1]["step"], 0)
        assert score["termination"] == ("success" if score["success"] else "step_limit")
        assert score["success"] or score["steps"] == self.service.max_steps
        wire.close()

    def close(self) -> None:
        for wire in self.opened:
            wire.close()


def _sim(service: sim_server.SimService, cases: Iterator[str], kit: Any) -> Iterator[Sim]:
    sim = Sim(service, cases, kit)
    yield sim
    sim.close()  # abandons the test's sessions, freeing the simulator slot
    sim.assert_serves()


@pytest.fixture(scope="module")
def fresh_cases(service: sim_server.SimService) -> Iterator[str]:
    return iter(service.cases)


@pytest.fixture
def sim(service: sim_server.SimService, fresh_cases: Iterator[str], wire_kit) -> Iterator[Sim]:
    yield from _sim(service, fresh_cases, wire_kit)


@pytest.fixture(scope="module")
def fresh_video_cases(video_service: sim_server.SimService) -> Iterator[str]:
    return iter(video_service.cases)


@pytest.fixture
def video_sim(video_service: sim_server.SimService,
              fresh_video_cases: Iterator[str], wire_kit) -> Iterator[Sim]:
    yield from _sim(video_service, fresh_video_cases, wire_kit)


def raw_array(dtype: str, shape: list[int], data: bytes) -> dict[str, Any]:
    return {"__ndarray__": True, "data": data, "dtype": dtype, "shape": shape}


def frame(message: dict[str, Any]) -> bytes:
    """A frame the workbench's encoder would refuse to write (raw array dicts)."""
    return msgpack.packb(message, use_bin_type=True)


# -- actions that break the contract ---------------------------------------------------
@pytest.mark.parametrize("component, value", [(0, 1.5), (2, -1.5), (3, 1.0001)])
def test_an_action_out_of_bounds_is_rejected_naming_its_component(sim, component, value):
    wire, case = sim.start()
    before = sim.snapshot(wire, case)
    action = ZERO.copy()
    action[component] = value
    reply = wire.request("step", action=action)
    assert reply["type"] == "rejected" and reply["rejections"] == 1
    assert f"component {component} = {np.float32(value):.4g} outside [-1, 1]" in \
        reply["message"]
    assert len(reply["message"]) <= MESSAGE_CHARS
    sim.assert_not_advanced(wire, case, before, refused=1)
    ack = wire.request("step", action=ZERO)
    assert (ack["type"], ack["step"], ack["done"]) == ("ack", 1, False)


BAD_ACTIONS = {
    "shape (3,)": (np.zeros(3, np.float32), "got (3,)"),
    "chunk (2, 4)": (np.zeros((2, 4), np.float32), "got a chunk of 2"),
    "shape (4, 1)": (np.zeros((4, 1), np.float32), "got (4, 1)"),
    "empty chunk (0, 4)": (np.zeros((0, 4), np.float32), "got (0, 4)"),
    "float64": (np.zeros(4, np.float64), "expected dtype float32; got float64"),
    "int32": (np.zeros(4, np.int32), "expected dtype float32; got int32"),
    "bool": (np.zeros(4, bool), "expected dtype float32; got bool"),
    "big-endian float32": (np.zeros(4, ">f4"), "expected dtype float32; got >f4"),
    "nan": (np.array([0, np.nan, 0, 0], np.float32), "contains NaN or inf"),
    "inf": (np.array([0, 0, np.inf, 0], np.float32), "contains NaN or inf"),
    "-inf": (np.array([0, 0, 0, -np.inf], np.float32), "contains NaN or inf"),
    "a list": ([0.0, 0.0, 0.0, 0.0], "got list"),
    "a string": ("0 0 0 0", "got str"),
    "a map": ({"x": 0.0}, "got dict"),
    "nil": (None, "got NoneType"),
    "a float32 scalar": (np.float32(0.0), "got float32"),
}


@pytest.mark.parametrize("name", list(BAD_ACTIONS))
def test_an_action_off_contract_is_rejected_and_not_executed(sim, name):
    action, fragment = BAD_ACTIONS[name]
    wire, case = sim.start()
    before = sim.snapshot(wire, case)
    reply = wire.request("step", action=action)
    assert reply["type"] == "rejected" and reply["rejections"] == 1
    assert fragment in reply["message"] and len(reply["message"]) <= MESSAGE_CHARS
    sim.assert_not_advanced(wire, case, before, refused=1)
    ack = wire.request("step", action=ZERO)
    assert (ack["type"], ack["step"], ack["done"]) == ("ack", 1, False)


UNDECODABLE_ACTIONS = {
    "object dtype": (raw_array("|O", [4], bytes(32)), "'|O' may not cross the wire"),
    "complex dtype": (raw_array("<c8", [4], bytes(32)), "'<c8' may not cross the wire"),
    "unicode dtype": (raw_array("<U1", [4], bytes(16)), "'<U1' may not cross the wire"),
    "bytes dtype": (raw_array("|S4", [4], bytes(16)), "'|S4' may not cross the wire"),
    "bytes short of the shape": (raw_array("<f4", [4], bytes(15)), "15 bytes do not hold"),
    "bytes beyond the shape": (raw_array("<f4", [4], bytes(17)), "17 bytes do not hold"),
    "negative shape": (raw_array("<f4", [-4], bytes(16)), "non-negative integers"),
    "unknown dtype": (raw_array("<q9", [4], bytes(16)), "unknown dtype '<q9'"),
}


@pytest.mark.parametrize("name", list(UNDECODABLE_ACTIONS))
def test_an_undecodable_action_is_malformed_and_leaves_seq_and_simulator_alone(sim, name):
    action, fragment = UNDECODABLE_ACTIONS[name]
    wire, case = sim.start()
    before = sim.snapshot(wire, case)
    reply = wire.exchange(frame({"type": "step", "seq": wire.seq, "action": action}))
    assert (reply["type"], reply["code"], reply["seq"]) == ("error", "malformed", None)
    assert fragment in reply["message"], reply["message"]
    sim.assert_not_advanced(wire, case, before, refused=0)
    ack = wire.request("step", action=ZERO)  # the refused frame's seq is still free
    assert (ack["type"], ack["step"], ack["done"]) == ("ack", 1, False)


def test_refused_actions_end_the_session_at_the_servers_limit(sim):
    wire, case = sim.start()
    replies = [wire.request("step", action=np.zeros(3, np.float32))
               for _ in range(MAX_REJECTIONS)]
    assert [r["type"] for r in replies] == ["rejected"] * MAX_REJECTIONS
    assert [r["rejections"] for r in replies] == list(range(1, MAX_REJECTIONS + 1))
    assert wire.request("step", action=ZERO)["code"] == "no_session"
    score = sim.score(case)
    assert (score["state"], score["termination"], score["steps"], score["success"]) == \
        ("done", "rejections", 0, False)


# -- joining, sessions and cases ---------------------------------------------------------
def test_a_second_hello_is_refused_and_does_not_make_the_connection_admin(sim, service):
    wire = sim.join()
    reply = wire.request("hello", protocol=PROTOCOL, token=service.token)
    assert (reply["type"], reply["code"]) == ("error", "joined")
    assert wire.request("status")["code"] == "unauthorized"
    assert wire.request("observe")["code"] == "no_session"


@pytest.mark.parametrize("kind, fields", [("step", {"action": ZERO}), ("observe", {}),
                                          ("start", {"case": "x", "features": ["state"]}),
                                          ("status", {})])
def test_a_request_before_hello_is_refused_not_joined(sim, kind, fields):
    wire = sim.connect()
    reply = wire.request(kind, **fields)
    assert (reply["type"], reply["code"], reply["seq"]) == ("error", "not_joined", 0)
    assert wire.hello(ticket=sim.ticket())["seq"] == 1


@pytest.mark.parametrize("kind", ["step", "observe", "end"])
def test_a_session_request_before_start_is_refused_no_session(sim, kind):
    wire = sim.join()
    reply = wire.request(kind, **({"action": ZERO} if kind == "step" else {}))
    assert (reply["type"], reply["code"]) == ("error", "no_session")


@pytest.mark.parametrize("case", ["metaworld/MT10/reach-v3/9999", "", 3, None,
                                  ["metaworld/MT10/reach-v3/0000"]])
def test_a_ticket_for_a_case_off_the_schedule_is_refused_unknown_case(sim, case):
    admin = sim.join(admin=True)
    reply = admin.request("ticket", case=case)
    assert (reply["type"], reply["code"]) == ("error", "unknown_case")
    assert admin.request("status")["type"] == "status"  # the admin connection stays


@pytest.mark.parametrize("case", ["metaworld/MT10/reach-v3/9999", "", 3, None, "other"])
def test_a_tickets_connection_starts_only_its_own_case(sim, case):
    wire, other = sim.join(), next(sim.cases)
    case = other if case == "other" else case
    reply = wire.request("start", case=case, features=["state"])
    assert (reply["type"], reply["code"]) == ("error", "wrong_case")
    assert wire.case in reply["message"]
    assert sim.score(other)["state"] == "unattempted"
    assert wire.request("start", features=["state"])["case"] == wire.case  # its own: yes


def test_a_case_is_started_once_across_connections(sim):
    first, case = sim.start()
    admin = sim.join(admin=True)
    reply = admin.request("ticket", case=case)  # no second key to a case that ran
    assert (reply["type"], reply["code"]) == ("error", "attempted")
    ack = first.request("step", action=ZERO)  # the first session is untouched
    assert (ack["type"], ack["step"]) == ("ack", 1)
    first.close()  # abandoned: still no plain ticket; an operator's retry only
    assert _settled_score(sim, case)["state"] == "abandoned"
    assert admin.request("ticket", case=case)["code"] == "attempted"
    retry = sim.connect()
    retry.hello(ticket=sim.ticket(case, retry=True))
    assert retry.request("start", features=["state"])["type"] == "started"
    assert sim.score(case)["attempts"] == 2


def test_a_ticket_runs_one_session_and_joins_one_connection(sim, service):
    ticket = sim.ticket()
    wire = sim.connect()
    case = wire.hello(ticket=ticket)["case"]
    again = sim.connect()  # the same ticket again: used
    reply = again.request("hello", protocol=PROTOCOL, ticket=ticket)
    assert (reply["code"], reply["message"]) == ("unauthorized", "unknown, used or void ticket")
    assert again.closed_with() == 1008
    assert wire.request("start", features=["state"])["type"] == "started"
    assert wire.request("end")["type"] == "ended"
    reply = wire.request("start", features=["state"])
    assert (reply["type"], reply["code"]) == ("error", "attempted")
    assert sim.score(case)["attempts"] == 1


def test_a_new_ticket_voids_the_cases_earlier_one(sim):
    case = next(sim.cases)
    first, second = sim.ticket(case), sim.ticket(case)
    wire = sim.connect()
    assert wire.request("hello", protocol=PROTOCOL, ticket=first)["code"] == "unauthorized"
    assert sim.connect().hello(ticket=second)["case"] == case


@pytest.mark.parametrize("retry", [True, "yes", 1, None])
def test_a_retry_ticket_is_refused_for_a_case_that_never_ran_or_a_bad_flag(sim, retry):
    admin = sim.join(admin=True)
    reply = admin.request("ticket", case=next(sim.cases), retry=retry)
    assert (reply["type"], reply["code"]) == \
        ("error", "attempted" if retry is True else "malformed")


def test_the_admin_connection_runs_no_sessions(sim):
    admin, case = sim.join(admin=True), next(sim.cases)
    reply = admin.request("start", case=case, features=["state"])
    assert (reply["type"], reply["code"]) == ("error", "unauthorized")
    assert "ticket" in reply["message"]
    assert sim.score(case)["state"] == "unattempted"


def test_a_second_start_on_a_running_connection_is_refused(sim):
    wire, case = sim.start()
    reply = wire.request("start", case=next(sim.cases), features=["state"])
    assert (reply["type"], reply["code"]) == ("error", "session_active")
    assert wire.request("observe")["step"] == 0


@pytest.mark.parametrize("features", [["privileged.state"], ["state", "privileged.state"],
                                      ["depth"], [], "state", None, [3]])
def test_a_start_with_undeclared_features_is_refused_and_leaves_the_case_unattempted(
        sim, features):
    wire = sim.join()
    case = wire.case
    reply = wire.request("start", case=case, features=features)
    assert (reply["type"], reply["code"]) == ("error", "features")
    assert "privileged" not in reply["message"]
    score = sim.score(case)
    assert (score["state"], score["attempts"]) == ("unattempted", 0)
    assert wire.request("start", case=case, features=["state"])["type"] == "started"


# -- hello: protocol and token -----------------------------------------------------------
@pytest.mark.parametrize("protocol", ["workbench.sim-server/v0", "", None, 1,
                                      np.zeros(2, np.float32), [PROTOCOL]])
def test_a_wrong_protocol_is_refused_and_the_connection_closed(sim, protocol):
    wire = sim.connect()
    reply = wire.request("hello", protocol=protocol)
    assert (reply["type"], reply["code"], reply["seq"]) == ("error", "protocol", 0)
    assert PROTOCOL in reply["message"]
    assert wire.closed_with() == 1008


@pytest.mark.parametrize("credentials", [{}, {"token": None}, {"ticket": None},
                                         {"token": "x", "ticket": "y"}])
def test_a_hello_without_exactly_one_credential_is_refused_and_closed(sim, service,
                                                                     credentials):
    wire = sim.connect()
    reply = wire.exchange(encode({"type": "hello", "seq": 0, "protocol": PROTOCOL,
                                  **credentials}))
    assert (reply["type"], reply["code"]) == ("error", "unauthorized")
    assert "token or a ticket" in reply["message"]
    assert wire.closed_with() == 1008


@pytest.mark.parametrize("ticket", ["", "forged-ticket", "x" * 10_000, 7, b"bytes", [1]])
def test_an_unknown_ticket_is_refused_unauthorized_and_the_connection_closed(sim, ticket):
    wire = sim.connect()
    reply = wire.request("hello", protocol=PROTOCOL, ticket=ticket)
    assert (reply["type"], reply["code"]) == ("error", "unauthorized")
    assert wire.closed_with() == 1008


@pytest.mark.parametrize("token", ["not-the-token", "", "é-non-ascii", 12345, b"bytes"])
def test_a_wrong_token_is_refused_unauthorized_and_the_connection_closed(sim, token):
    wire = sim.connect()
    reply = wire.request("hello", protocol=PROTOCOL, token=token)
    assert (reply["type"], reply["code"], reply["message"]) == \
        ("error", "unauthorized", "wrong admin token")
    assert wire.closed_with() == 1008


@pytest.mark.parametrize("kind, fields", [("status", {}), ("score", {"case": "x"}),
                                          ("export", {}), ("artifacts", {}),
                                          ("artifact", {"name": "x", "offset": 0})])
def test_an_admin_request_without_the_token_is_refused_and_the_connection_stays(
        sim, kind, fields):
    wire = sim.join()
    reply = wire.request(kind, **fields)
    assert (reply["type"], reply["code"]) == ("error", "unauthorized")
    started = wire.request("start", features=["state"])
    assert started["type"] == "started"
    assert wire.request("step", action=ZERO)["step"] == 1


# -- sequence numbers --------------------------------------------------------------------
@pytest.mark.parametrize("seq", ["missing", "0", 0.0, True, None, [0], {"n": 0}])
def test_a_request_without_an_integer_seq_is_malformed_and_consumes_no_seq(sim, seq):
    wire = sim.connect()
    message = {"type": "hello", "protocol": PROTOCOL}
    if seq != "missing":
        message["seq"] = seq
    reply = wire.exchange(encode(message))
    assert (reply["type"], reply["code"], reply["seq"]) == ("error", "malformed", None)
    assert wire.hello(ticket=sim.ticket())["seq"] == 0


def test_a_repeated_request_is_refused_and_not_executed_again(sim):
    wire, case = sim.start()
    step = encode({"type": "step", "seq": wire.seq, "action": ZERO})
    assert wire.exchange(step)["step"] == 1
    wire.seq += 1
    again = wire.exchange(step)  # a client replaying a request whose reply it lost
    assert (again["type"], again["code"], again["seq"]) == ("error", "sequence", wire.seq - 1)
    assert f"expected seq {wire.seq}" in again["message"]
    assert wire.request("observe")["step"] == 1


@pytest.mark.parametrize("offset", [1, 5, -1, 2**63 - 1, -2**63])
def test_a_request_out_of_sequence_is_refused_and_not_executed(sim, offset):
    wire, case = sim.start()
    before = sim.snapshot(wire, case)
    seq = max(-2**63, min(2**63 - 1, wire.seq + offset))
    reply = wire.request("step", seq=seq, action=ZERO)
    assert (reply["type"], reply["code"], reply["seq"]) == ("error", "sequence", seq)
    sim.assert_not_advanced(wire, case, before, refused=0)
    assert wire.request("step", action=ZERO)["step"] == 1


# -- frames that are not requests --------------------------------------------------------
@pytest.mark.parametrize("kind", ["reset", "STEP", "", 7, None, ["step"]])
def test_an_unknown_type_is_refused_and_consumes_its_seq(sim, kind):
    wire, case = sim.start()
    reply = wire.request(kind)
    assert (reply["type"], reply["code"]) == ("error", "unknown_type")
    assert "known: ['end', 'hello', 'observe', 'start', 'step']" in reply["message"]
    assert "score" not in reply["message"]  # admin requests are not advertised to policies
    assert wire.request("observe")["step"] == 0


NOT_REQUESTS = {
    "text frame": "hello",
    "garbage bytes": b"\xc1\xff\x00garbage",
    "truncated msgpack": encode({"type": "step", "seq": 0})[:-3],
    "msgpack with trailing bytes": encode({"type": "observe", "seq": 0}) + b"\x00",
    "empty frame": b"",
    "a msgpack list": encode(["step", 0]),
    "a msgpack integer": encode(3),
    "a key that is not UTF-8": b"\x81\xc4\x02\xff\xfe\x01",
    "nesting past msgpack's stack": b"\x91" * 2000 + b"\xc0",
}


@pytest.mark.parametrize("name", list(NOT_REQUESTS))
def test_a_frame_that_is_not_a_request_is_malformed_and_changes_nothing(sim, name):
    wire, case = sim.start()
    before = sim.snapshot(wire, case)
    reply = wire.exchange(NOT_REQUESTS[name])
    assert (reply["type"], reply["code"], reply["seq"]) == ("error", "malformed", None)
    sim.assert_not_advanced(wire, case, before, refused=0)


def test_a_deeply_nested_value_is_refused_by_its_type(sim):
    deep = b"\x91" * 1000 + encode("bottom")  # within msgpack's stack, past repr's limit
    wire = sim.connect()
    reply = wire.exchange(b"\x83" + encode("type") + encode("hello") + encode("seq")
                          + encode(0) + encode("protocol") + deep)
    assert (reply["type"], reply["code"]) == ("error", "protocol")
    assert reply["message"].endswith("not a list")
    assert wire.closed_with() == 1008


def test_a_frame_over_the_limit_closes_the_connection_1009_and_abandons_its_session(sim):
    wire, case = sim.start()
    assert wire.request("step", action=ZERO, pad=bytes(FRAME_LIMIT - 200))["step"] == 1
    wire.ws.send(encode({"type": "step", "seq": wire.seq, "action": ZERO,
                         "pad": bytes(FRAME_LIMIT)}))
    assert wire.closed_with() == 1009
    score = _settled_score(sim, case)
    assert (score["state"], score["steps"], score["rejections"]) == ("abandoned", 1, 0)


def _settled_score(sim: Sim, case: str) -> dict[str, Any]:
    """The case's score once the server has noticed that its connection closed."""
    deadline = time.monotonic() + sim.kit.RECV_S
    while (score := sim.score(case))["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    return score


# -- the end of an episode ---------------------------------------------------------------
def test_a_step_after_the_policy_ended_the_episode_is_refused_no_session(sim):
    wire, case = sim.start()
    assert wire.request("step", action=ZERO)["step"] == 1
    assert wire.request("end") == {"type": "ended", "step": 1, "seq": wire.seq - 1}
    for kind in ("step", "observe", "end"):
        reply = wire.request(kind, action=ZERO)
        assert (reply["type"], reply["code"]) == ("error", "no_session")
    score = sim.score(case)
    assert (score["state"], score["termination"], score["steps"], score["rejections"]) == \
        ("done", "policy_stop", 1, 0)


def test_the_execution_budget_ends_the_episode_and_no_control_runs_past_it(sim):
    wire, case = sim.start()
    acks = sim.run_to_done(wire)
    assert [a["done"] for a in acks] == [False] * (MAX_STEPS - 1) + [True]
    reply = wire.request("step", action=ZERO)
    assert (reply["type"], reply["code"]) == ("error", "no_session")
    rejected = wire.request("step", action=np.full(4, 2.0, np.float32))
    assert rejected["code"] == "no_session"  # refused before any check: nothing counted
    score = sim.score(case)
    assert (score["state"], score["termination"], score["steps"], score["rejections"],
            score["success"]) == ("done", "step_limit", MAX_STEPS, 0, False)


# -- what the policy side may see --------------------------------------------------------
def test_reply_faults_finds_secrets_anywhere_and_internals_even_for_admins(wire_kit):
    reply_faults = wire_kit.reply_faults
    assert reply_faults({"type": "ack", "a": [{"b": {"reward": 1.0}}]}, admin=False)
    assert reply_faults({"type": "x", "spec": ["privileged.state"]}, admin=False)
    assert reply_faults({"type": "x", "m": 'File "/work/workbench/x.py"'}, admin=True)
    assert reply_faults({"type": "x", "m": "Traceback (most recent call last)"}, admin=True)
    assert not reply_faults({"type": "score", "success": True}, admin=True)
    assert not reply_faults({"type": "error", "message": "'score' is unknown"}, admin=False)


def test_a_policy_side_session_sees_only_its_declared_public_features(sim):
    wire, case = sim.start(features=tuple(PUBLIC))
    welcome, started = wire.replies
    assert [f["name"] for f in welcome["spec"]["observation"]] == PUBLIC
    assert sorted(started["observation"]) == sorted(PUBLIC)
    assert started["observation"]["images.primary"].shape == (32, 32, 3)
    for _ in range(3):
        ack = wire.request("step", action=ZERO)
        assert sorted(ack["observation"]) == sorted(PUBLIC)
    assert sorted(wire.request("observe")["observation"]) == sorted(PUBLIC)
    assert "observation" not in wire.request("step", action=ZERO, observe=False)
    assert wire.request("end")["type"] == "ended"
    assert [r["type"] for r in wire.replies] == \
        ["welcome", "started", "ack", "ack", "ack", "observation", "ack", "ended"]
    assert not any(sim.kit.reply_faults(r, admin=False) for r in wire.replies)


# -- artifacts ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def manifest(video_service, fresh_video_cases, wire_kit) -> list[dict[str, Any]]:
    """The entries of three finished sessions of the video service: one run to its
    budget, one ended by the policy, one abandoned (its connection closed)."""
    sim = Sim(video_service, fresh_video_cases, wire_kit)
    cases = []
    for finish in ("budget", "end", "abandon"):
        wire, case = sim.start()
        cases.append(case)
        if finish == "budget":
            sim.run_to_done(wire)
            continue
        for step in range(1, 6):
            assert wire.request("step", action=ZERO)["step"] == step
        if finish == "end":
            assert wire.request("end")["type"] == "ended"
        wire.close()
    admin = sim.join(admin=True)
    deadline = time.monotonic() + wire_kit.RECV_S  # the abandoned one is written late
    while len(entries := [e for e in admin.request("artifacts")["artifacts"]
                          if e["case"] in cases]) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    sim.close()
    return entries


def admin_client(service: sim_server.SimService, kit: Any) -> SimClient:
    return SimClient(service.url, token=service.token, timeout_s=kit.RECV_S)


def test_each_finished_session_has_a_manifest_entry_matching_its_file(manifest, video_service):
    assert [e["case"] for e in manifest] == list(video_service.cases)[:3]
    for entry in manifest:
        assert sorted(entry) == ["case", "name", "sha256", "size"]  # never a server path
        data = (Path(video_service.artifacts_dir) / entry["name"]).read_bytes()
        assert (entry["size"], entry["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert manifest[0]["size"] > 2 * VIDEO_CHUNK  # the download below takes several chunks


def test_an_artifact_downloads_in_chunks_and_hashes_to_the_manifest(
        video_sim, video_service, manifest, tmp_path):
    client = admin_client(video_service, video_sim.kit)
    calls, request = [], client.request

    def counted(kind, **fields):
        reply = request(kind, **fields)
        calls.append((kind, fields, len(reply.get("data", b""))))
        return reply

    client.request = counted
    entry = manifest[0]
    path = client.fetch_artifact(entry, tmp_path / "video.mp4")
    client.close()
    assert client.welcome["limits"]["chunk_bytes"] == VIDEO_CHUNK
    assert [k for k, _, _ in calls] == ["artifact"] * math.ceil(entry["size"] / VIDEO_CHUNK)
    assert [f["offset"] for _, f, _ in calls] == list(range(0, entry["size"], VIDEO_CHUNK))
    assert all(f["length"] == VIDEO_CHUNK and n <= VIDEO_CHUNK for _, f, n in calls)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]


def test_an_artifact_changed_after_the_manifest_raises_mismatch_and_leaves_no_file(
        video_sim, video_service, manifest, tmp_path):
    entry = manifest[1]
    served = Path(video_service.artifacts_dir) / entry["name"]
    data = bytearray(served.read_bytes())
    data[len(data) // 2] ^= 0xFF
    served.write_bytes(bytes(data))
    client = admin_client(video_service, video_sim.kit)
    with pytest.raises(ArtifactMismatch, match=entry["name"]):
        client.fetch_artifact(entry, tmp_path / "video.mp4")
    client.close()
    assert not (tmp_path / "video.mp4").exists()


def test_an_artifact_gone_from_the_server_is_refused_and_leaves_no_file(
        video_sim, video_service, manifest, tmp_path):
    entry = manifest[2]
    (Path(video_service.artifacts_dir) / entry["name"]).unlink()
    client = admin_client(video_service, video_sim.kit)
    with pytest.raises(ServiceError) as refused:
        client.fetch_artifact(entry, tmp_path / "video.mp4")
    assert refused.value.code == "unavailable"
    assert str(video_service.artifacts_dir) not in str(refused.value)
    assert not (tmp_path / "video.mp4").exists()
    assert client.request("artifacts")["type"] == "artifacts"  # the connection stays
    client.close()


def test_an_artifact_request_out_of_range_is_malformed_and_the_connection_stays(
        video_sim, manifest):
    admin, entry = video_sim.join(admin=True), manifest[0]
    for offset, length in [(entry["size"] + 1, 16), (2**63 - 1, 16), (2**64 - 1, 16),
                           (-1, 16), (0, -1), (0, True), ("0", 16), (None, 16)]:
        reply = admin.request("artifact", name=entry["name"], offset=offset, length=length)
        assert (reply["type"], reply["code"]) == ("error", "malformed"), (offset, length)
    end = admin.request("artifact", name=entry["name"], offset=entry["size"], length=16)
    assert (end["type"], end["offset"], end["data"]) == ("artifact", entry["size"], b"")
    for name in ("nope.mp4", None, 3):
        reply = admin.request("artifact", name=name, offset=0)
        assert (reply["type"], reply["code"]) == ("error", "unknown_artifact")


def test_a_silent_session_is_abandoned_and_frees_its_slot(wire_kit):
    with build_service("metaworld", "MT1:reach-v3", episodes=2, image_size=32, max_steps=5,
                       idle_timeout_s=0.5) as service:
        case, other = (s.episode_id for s in service.schedule)
        idle = wire_kit.Wire(service.url)  # joined with nothing: closed after the timeout
        first = wire_kit.Wire(service.url)
        first.hello(ticket=wire_kit.take_ticket(service.url, service.token, case))
        assert first.request("start", features=["state"])["type"] == "started"
        time.sleep(1.5)
        assert first.closed_with() == 1008
        deadline = time.monotonic() + 10  # the server books it after the close handshake
        while service.cases[case].state == "running" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert service.cases[case].state == "abandoned"
        assert idle.closed_with() == 1008
        second = wire_kit.Wire(service.url)
        second.hello(ticket=wire_kit.take_ticket(service.url, service.token, other))
        assert second.request("start", features=["state"])["type"] == "started"
        second.close()


def test_the_admin_exports_every_case_score(sim):
    wire, case = sim.start()
    acks = sim.run_to_done(wire)
    export = sim.join(admin=True).request("export")
    assert export["type"] == "export" and export["protocol"] == PROTOCOL
    assert [c["case"] for c in export["cases"]] == [s.episode_id for s in sim.service.schedule]
    mine = next(c for c in export["cases"] if c["case"] == case)
    assert (mine["state"], mine["steps"]) == ("done", acks[-1]["step"])
    assert mine == {k: v for k, v in sim.score(case).items() if k not in ("type", "seq")}
