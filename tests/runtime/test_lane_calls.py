"""How a worker's lanes' policy calls become messages to its replica (``LaneCalls``):
acts wait for every open lane's act and go as one message; a reset or an episode's end
goes at once, alone, so no act message leaves without an open lane's act."""

import threading

import numpy as np
import pytest

from workbench.runtime.worker import LaneCalls


class Recorder:
    """The replica's side of the pipe as ``LaneCalls`` reaches it (``ReplicaProxy.many``):
    records each message and answers each call as a replica does."""

    replica_id = 0

    def __init__(self) -> None:
        self.messages: list[list[tuple[str, object]]] = []
        self.in_flight = False
        self.overlapped = False

    def many(self, calls):
        self.overlapped |= self.in_flight
        self.in_flight = True
        self.messages.append(list(calls))
        try:
            return [("actions", np.full(2, payload)) if kind == "act" else ("ok", None)
                    for kind, payload in calls]
        finally:
            self.in_flight = False


def run_lane(calls: LaneCalls, lane: int, acts: int, got: dict) -> None:
    """One lane's episode as the step loop calls it, then its end as ``Lanes`` books it."""
    calls.call(lane, "reset", f"episode-{lane}")
    got[lane] = [calls.call(lane, "act", 10 * lane + k) for k in range(acts)]
    calls.call(lane, "end", f"episode-{lane}")
    with calls.cond:
        calls.open -= 1
        calls.send_if_all_wait()


def test_acts_go_together_and_resets_and_ends_go_alone_without_holding_back_a_batch():
    recorder = Recorder()
    calls = LaneCalls(recorder)
    calls.open = 3
    got: dict[int, list] = {}
    threads = [threading.Thread(target=run_lane, args=(calls, lane, acts, got))
               for lane, acts in [(0, 2), (1, 4), (2, 4)]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads)
    act_messages = [[payload for kind, payload in m if kind == "act"]
                    for m in recorder.messages if any(kind == "act" for kind, _ in m)]
    lifecycle = [m for m in recorder.messages if any(kind != "act" for kind, _ in m)]
    # two rounds with all three lanes' acts, then two with the two lanes still open
    assert [sorted(m) for m in act_messages] == [[0, 10, 20], [1, 11, 21], [12, 22], [13, 23]]
    assert len(lifecycle) == 6 and all(len(m) == 1 for m in lifecycle)
    assert not recorder.overlapped
    assert {lane: [float(a[0]) for a in acts] for lane, acts in got.items()} == {
        0: [0, 1], 1: [10, 11, 12, 13], 2: [20, 21, 22, 23]}


def test_a_failed_reset_is_that_lanes_alone_and_the_others_acts_go_on():
    class FailingResets(Recorder):
        def many(self, calls):
            if calls[0][0] == "reset" and calls[0][1] == "episode-1":
                raise OSError("pipe closed")
            return super().many(calls)

    recorder = FailingResets()
    calls = LaneCalls(recorder)
    calls.open = 1
    with pytest.raises(OSError, match="pipe closed"):
        calls.call(1, "reset", "episode-1")
    assert float(calls.call(0, "act", 5)[0]) == 5
    assert recorder.messages == [[("act", 5)]]
