"""A client of the SIM wire (docs/sim-wire.md) written from that page alone: as the
operator (it holds the admin token), it runs every case of a `workbench serve` service's
schedule with a policy that moves the end effector's first coordinate toward 0, and
prints one line per case.

Only websockets and msgpack are needed (and the standard library):

    WORKBENCH_SIM_TOKEN=... python docs/examples/sim_wire_client.py ws://127.0.0.1:8765
"""

import os
import struct
import sys

import msgpack
from websockets.sync.client import connect

DTYPES = {"<f4": "f", "<f8": "d", "|u1": "B", "<i8": "q"}  # numpy dtype.str -> struct


def array(values, dtype="<f4"):
    """A typed array map, with bytes keys as the wire wants them."""
    data = struct.pack(f"<{len(values)}{DTYPES[dtype]}", *values)
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": [len(values)]}


def numbers(value):
    """A 1-D array map read back as a list of numbers."""
    code = DTYPES[value[b"dtype"]]
    return list(struct.unpack(f"<{len(value[b'data']) // struct.calcsize(code)}{code}",
                              value[b"data"]))


class Client:
    def __init__(self, ws):
        self.ws, self.seq = ws, 0

    def ask(self, message):
        """Send a request with the next seq; its reply (an error raises)."""
        self.ws.send(msgpack.packb({**message, "seq": self.seq}, use_bin_type=True))
        self.seq += 1
        reply = msgpack.unpackb(self.ws.recv(), raw=False)
        if reply["type"] == "error":
            raise RuntimeError(f"{reply['code']}: {reply['message']}")
        return reply


def policy(state, dim):
    """The first coordinate toward 0, the rest still, within the bounds [-1, 1]."""
    push = max(-1.0, min(1.0, -10.0 * state[0])) if state else 0.0
    return [push] + [0.0] * (dim - 1)


def main(url, token):
    with connect(url, max_size=None) as ws:
        run(Client(ws), url, token)


def run(admin, url, token):
    """The operator's connection hands out one ticket per case; each case runs on a
    connection of its own that holds only its ticket."""
    welcome = admin.ask({"type": "hello", "protocol": "workbench.sim-server/v2",
                         "token": token})
    spec = welcome["spec"]
    dim, names = spec["action"]["dim"], [f["name"] for f in spec["observation"]]
    features = ["state"] if "state" in names else names[:1]
    for case in welcome["schedule"]:
        ticket = admin.ask({"type": "ticket", "case": case})["ticket"]
        with connect(url, max_size=None) as ws:
            session = Client(ws)
            session.ask({"type": "hello", "protocol": "workbench.sim-server/v2",
                         "ticket": ticket})
            started = session.ask({"type": "start", "features": features})
            observation, done, success = started["observation"], False, False
            while not done:
                state = numbers(observation["state"]) if "state" in observation else []
                reply = session.ask({"type": "step", "action": array(policy(state, dim))})
                if reply["type"] == "rejected":
                    raise RuntimeError(f"action refused: {reply['message']}")
                observation, done, steps = reply.get("observation"), reply["done"], reply["step"]
                # success is told to the operator only; the operator ends the episode there
                success = admin.ask({"type": "score", "case": case})["terminal_step"] is not None
                if success and not done:
                    session.ask({"type": "end"})
                    done = True
        print(f"{case}: {steps} steps, task {started['task']!r}, success {success}")


if __name__ == "__main__":
    main(sys.argv[1], os.environ["WORKBENCH_SIM_TOKEN"])
