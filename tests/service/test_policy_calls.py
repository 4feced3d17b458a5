"""The served policy's call thread: a connection's reset that arrives while observations
are being gathered runs at once, so that connection's first observation joins the batch."""

from __future__ import annotations

import time

from workbench.contracts.capabilities import EpisodeContext, LoadContext
from workbench.policies import make_policy
from workbench.service.policy_calls import PolicyCalls


def test_a_reset_arriving_while_a_batch_gathers_runs_at_once_and_its_observation_joins():
    calls = PolicyCalls(make_policy("zero", protocol="metaworld-v1"), max_batch=2,
                        max_wait_ms=5000, senders=lambda: 2)
    try:
        calls.call("load", LoadContext("metaworld-v1")).result(5)
        calls.call("reset", EpisodeContext("e0", "t", "", 0)).result(5)
        first = calls.act({"episode_id": "e0", "state": None})
        time.sleep(0.2)  # the thread now holds e0's observation and waits for a second
        began = time.monotonic()
        calls.call("reset", EpisodeContext("e1", "t", "", 1)).result(5)
        waited = time.monotonic() - began
        assert waited < 2.5, f"the reset waited {waited:.1f} s behind the gathering batch"
        second = calls.act({"episode_id": "e1", "state": None})
        assert first.result(5).tolist() == second.result(5).tolist() == [0.0] * 4
        assert calls.stats()["batches"] == {"2": 1}
    finally:
        calls.stop()
