"""A compliance suite for SIM wire servers (``workbench.sim-server/v2``, docs/sim-wire.md),
runnable against any server URL, as dm_env_rpc ships one for its servers: whoever writes
a server of the wire (or changes ours) runs it to see which rules hold.

It joins as the operator (the admin token), reads the welcome, and runs one case of the
schedule through a ticket's session, so **it attempts that case** (pass ``case`` to
choose which; the default is the first case the service holds as unattempted). The
rules checked, each one line of the :class:`~workbench.checks.CheckReport`:

- a hello without token or ticket, with a wrong token, or with a forged ticket is
  ``unauthorized`` and the connection is closed;
- the welcome names the protocol, a spec (observation features, action) and a schedule;
- a request before hello is ``not_joined``; a request of an unknown type is
  ``unknown_type``; a frame with a wrong ``seq`` is ``sequence``;
- the ticket's session starts only its own case; ``start`` with an undeclared feature
  is ``features``; the observation holds exactly the features asked for, as the spec
  declares them; a ticket runs one session;
- an action of the wrong size is ``rejected`` (counted); a valid one is acknowledged
  with the control counted; success is never on the session's channel; the admin's
  ``score`` of the case is there; ``end`` ends the session.

From the command line: ``python -m workbench.service.compliance ws://HOST:PORT`` with the
token in ``$WORKBENCH_SIM_TOKEN``; exit 1 when a rule failed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from workbench.checks import CheckReport
from workbench.contracts.wire import decode, encode
from workbench.service.sim_server import PROTOCOL

TIMEOUT_S = 30.0


class _Link:
    """One connection: requests with the next ``seq``, replies decoded."""

    def __init__(self, url: str) -> None:
        self.ws = connect(url, max_size=None, open_timeout=TIMEOUT_S)
        self.seq = 0

    def ask(self, message: dict[str, Any], seq: int | None = None) -> dict[str, Any]:
        self.ws.send(encode({**message, "seq": self.seq if seq is None else seq}))
        if seq is None:
            self.seq += 1
        return decode(self.ws.recv(timeout=TIMEOUT_S))

    def closed(self) -> bool:
        """Whether the server closed this connection (waits briefly)."""
        try:
            self.ws.recv(timeout=5)
        except ConnectionClosed:
            return True
        except TimeoutError:
            return False
        return False

    def close(self) -> None:
        self.ws.close()


def _error(reply: dict[str, Any], code: str) -> str | None:
    got = reply.get("code") if reply.get("type") == "error" else reply.get("type")
    return None if got == code else f"expected error {code!r}; got {got!r}"


def _refused_hello(url: str, hello: dict[str, Any]) -> str | None:
    link = _Link(url)
    try:
        problem = _error(link.ask({"type": "hello", "protocol": PROTOCOL, **hello}),
                         "unauthorized")
        return problem or (None if link.closed() else "expected the connection closed; "
                           "got it open")
    finally:
        link.close()


def run_compliance(url: str, token: str, case: str | None = None) -> CheckReport:
    """Check the server at ``url`` against the wire's rules (see the module docstring);
    one case of its schedule is attempted."""
    report = CheckReport(f"sim-wire compliance {url}")
    report.run("a hello with neither token nor ticket is unauthorized and closed",
               lambda: _refused_hello(url, {}))
    report.run("a hello with a wrong token is unauthorized and closed",
               lambda: _refused_hello(url, {"token": token + "-wrong"}))
    report.run("a hello with a forged ticket is unauthorized and closed",
               lambda: _refused_hello(url, {"ticket": "forged-ticket"}))
    admin = _Link(url)
    try:
        _admin_rules(report, admin, url, token, case)
    finally:
        admin.close()
    return report


def _admin_rules(report: CheckReport, admin: _Link, url: str, token: str,
                 case: str | None) -> None:
    report.run("a request before hello is not_joined",
               lambda: _error(admin.ask({"type": "status"}), "not_joined"))
    welcome: dict[str, Any] = {}

    def joined() -> str | None:
        welcome.update(admin.ask({"type": "hello", "protocol": PROTOCOL, "token": token}))
        keys = {"protocol", "spec", "schedule", "admin"} - set(welcome)
        if welcome.get("type") != "welcome" or keys:
            return f"expected a welcome with {sorted(keys)}; got {welcome.get('type')!r}"
        return None if welcome["schedule"] and welcome["admin"] is True else \
            "expected an admin welcome with a non-empty schedule; got none"

    if not report.run("the operator's hello is welcomed with a spec and a schedule", joined):
        return
    report.run("an unknown request type is unknown_type",
               lambda: _error(admin.ask({"type": "teleport"}), "unknown_type"))
    report.run("a frame with the wrong seq is refused (sequence)",
               lambda: _error(admin.ask({"type": "status"}, seq=admin.seq + 5), "sequence"))
    chosen = case or _unattempted(admin, welcome["schedule"])
    if chosen is None:
        report.run("a case is left to attempt", lambda: "expected an unattempted case; got "
                   "every case of the schedule attempted")
        return
    ticket = admin.ask({"type": "ticket", "case": chosen})
    if not report.run(f"a ticket is handed out for {chosen}", lambda: None if ticket.get(
            "type") == "ticket" else f"expected a ticket; got {ticket}"):
        return
    _session_rules(report, admin, url, welcome["spec"], chosen, ticket["ticket"])


def _unattempted(admin: _Link, schedule: list[str]) -> str | None:
    states = {c["case"]: c["state"] for c in admin.ask({"type": "status"})["cases"]}
    return next((c for c in schedule if states.get(c) == "unattempted"), None)


def _session_rules(report: CheckReport, admin: _Link, url: str, spec: dict[str, Any],
                   case: str, ticket: str) -> None:
    session = _Link(url)
    try:
        hello = session.ask({"type": "hello", "protocol": PROTOCOL, "ticket": ticket})
        if not report.run("the ticket's hello is welcomed for its case", lambda: None if (
                hello.get("type"), hello.get("case")) == ("welcome", case) else
                f"expected a welcome for {case}; got {hello.get('type')} {hello.get('case')}"):
            return
        report.run("an admin request on a ticket's connection is unauthorized",
                   lambda: _error(session.ask({"type": "status"}), "unauthorized"))
        report.run("start naming another case is wrong_case", lambda: _error(
            session.ask({"type": "start", "features": [spec["observation"][0]["name"]],
                         "case": case + "-other"}), "wrong_case"))
        report.run("start with an undeclared feature is refused (features)", lambda: _error(
            session.ask({"type": "start", "features": ["no-such-feature"]}), "features"))
        _episode_rules(report, admin, session, spec, case)
    finally:
        session.close()
    report.run("a used ticket is unauthorized", lambda: _refused_hello(url, {"ticket": ticket}))


def _episode_rules(report: CheckReport, admin: _Link, session: _Link, spec: dict[str, Any],
                   case: str) -> None:
    declared = {f["name"]: f for f in spec["observation"]}
    names = list(declared)[:2]
    started = session.ask({"type": "start", "features": names})

    def observed() -> str | None:
        if started.get("type") != "started":
            return f"expected started; got {started}"
        obs = started["observation"]
        if sorted(obs) != sorted(names):
            return f"expected features {sorted(names)}; got {sorted(obs)}"
        for name in names:
            want, value = declared[name], obs[name]
            if isinstance(value, np.ndarray) and (str(value.dtype) != want.get("dtype") or any(
                    d is not None and d >= 0 and d != s for d, s in zip(want.get("shape", []),
                                                             value.shape))):
                return (f"{name}: expected {want.get('dtype')} {want.get('shape')}; got "
                        f"{value.dtype} {list(value.shape)}")
        return None

    if not report.run("start observes exactly the features asked for, as declared", observed):
        return
    dim = int(spec["action"]["dim"])
    wrong = session.ask({"type": "step", "action": np.zeros(dim + 1, np.float32)})
    report.run("an action of the wrong size is rejected and counted", lambda: None if (
        wrong.get("type"), wrong.get("rejections")) == ("rejected", 1) else
        f"expected rejected with rejections 1; got {wrong}")
    ack = session.ask({"type": "step", "action": np.zeros(dim, np.float32)})
    report.run("a valid action is acknowledged as control 1, with no success on the "
               "session's channel", lambda: None if ack.get("type") == "ack" and
               ack.get("step") == 1 and "success" not in ack else f"expected ack step 1 "
               f"without success; got {ack}")
    score = admin.ask({"type": "score", "case": case})
    report.run("the operator reads the case's score", lambda: None if score.get(
        "type") == "score" and score.get("case") == case else f"expected a score; got {score}")
    ended = session.ask({"type": "end"})
    report.run("end ends the session", lambda: None if ended.get("type") == "ended" else
               f"expected ended; got {ended}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or "WORKBENCH_SIM_TOKEN" not in os.environ:
        print("usage: WORKBENCH_SIM_TOKEN=... python -m workbench.service.compliance "
              "ws://HOST:PORT", file=sys.stderr)
        return 2
    report = run_compliance(args[0], os.environ["WORKBENCH_SIM_TOKEN"])
    print(report.text())
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
