"""Remote policies in openpi's WebSocket protocol, both ways, over real loopback sockets:
our server driven by our client and by an openpi-style client, our client against an
openpi-style server, a server killed mid-episode, and bad frames sent to our server."""

import argparse
import signal
import subprocess
import sys
import threading
import time

import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.server import serve

import workbench
from workbench.benchmarks import make_benchmark
from workbench.contracts import Capabilities
from workbench.contracts.capabilities import EpisodeContext, LoadContext
from workbench.contracts.plan import plan_episodes
from workbench.contracts.results import InfrastructureError
from workbench.contracts.wire import decode, encode
from workbench.policies import Policy, make_policy
from workbench.policies.remote import RemotePolicy, RemotePolicyError
from workbench.runtime.episode import EpisodeObserver
from workbench.service.policy_server import run_policy_server, serve_policy

REACH = dict(benchmark="metaworld", suite="MT1:reach-v3", image_size=32, progress=False)
CONTEXT = EpisodeContext("e0", "reach-v3", "reach the goal", 0)
RECV_S = 10.0  # longest a test client waits for any frame
STEPS_COMPARED = 15


# -- openpi's msgpack_numpy conventions, written out as openpi-client packs them --------
def openpi_pack(obj):
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str,
                b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def openpi_unpack(obj):
    if b"__ndarray__" in obj:
        return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]),
                          shape=obj[b"shape"])
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def openpi_packb(message):
    return msgpack.packb(message, default=openpi_pack)


def openpi_unpackb(frame):
    return msgpack.unpackb(frame, object_hook=openpi_unpack)


def loaded(policy, protocol="metaworld-v1"):
    policy.load(LoadContext(protocol))
    return policy


# -- our server, our client ----------------------------------------------------------------
def test_served_expert_gives_the_local_experts_actions_on_metaworld_observations():
    local = loaded(make_policy("expert"))
    adapter = make_benchmark("metaworld", suite="MT1:reach-v3", image_size=32)
    spec = plan_episodes("metaworld", "MT1:reach-v3", ["reach-v3"], 1)[0]
    with serve_policy("expert") as served:
        remote = RemotePolicy(served.url)
        assert remote.capabilities == Capabilities("metaworld-v1", ("privileged.state",),
                                                   privileged=True)
        assert remote.name == "remote-expert"
        loaded(remote)
        context = EpisodeContext(spec.episode_id, spec.task, "reach", spec.seed)
        local.reset(context)
        remote.reset(context)
        adapter.reset(spec)
        for step in range(STEPS_COMPARED):
            obs = adapter.observe(["privileged.state"]) | {"episode_id": spec.episode_id,
                                                          "step": step}
            mine, theirs = local.act(obs), remote.act(obs)
            assert theirs.dtype == np.float32 and theirs.shape == (1, 4)
            np.testing.assert_array_equal(theirs[0], mine)
            adapter.step(mine)
        remote.end_episode(spec.episode_id)
        remote.unload()
    adapter.close()


@pytest.mark.parametrize("backend", ["sequential", "pool"])
def test_a_remote_run_has_the_local_runs_outcomes(tmp_path, backend):
    config = dict(REACH, episodes=2, backend=backend, pool={"workers": 2, "replicas": 1})
    local = workbench.run(dict(config, policy="expert", output_dir=str(tmp_path / "local")))
    with serve_policy("expert") as served:
        remote = workbench.run(dict(config, policy="remote", policy_options={"url": served.url},
                                    output_dir=str(tmp_path / "remote")))
    columns = ["episode_id", "success", "terminal_step", "steps"]
    assert remote.results[columns].values.tolist() == local.results[columns].values.tolist()
    assert remote.results["success"].all() and remote.results["error_kind"].isna().all()
    assert set(remote.results["policy"]) == {"remote-expert"}


def test_an_openpi_style_client_reads_the_metadata_and_gets_actions():
    state = np.linspace(-0.3, 0.3, 39).astype(np.float32)
    local = loaded(make_policy("expert"))
    local.reset(CONTEXT)
    expected = local.act({"episode_id": CONTEXT.episode_id, "privileged.state": state})
    with serve_policy("expert") as served, \
            connect(served.url, compression=None, max_size=None) as ws:
        metadata = openpi_unpackb(ws.recv(timeout=RECV_S))
        assert metadata["protocol"] == "metaworld-v1"
        assert metadata["features"] == ["privileged.state"]
        assert metadata["action"] == {"dim": 4, "dtype": "float32", "low": [-1.0] * 4,
                                      "high": [1.0] * 4}
        # no reset: an openpi client never sends one; the task rides along as a plain field
        ws.send(openpi_packb({"privileged.state": state, "task": "reach-v3",
                              "prompt": "reach the goal"}))
        reply = openpi_unpackb(ws.recv(timeout=RECV_S))
    assert reply["actions"].dtype == np.float32 and reply["actions"].shape == (1, 4)
    np.testing.assert_array_equal(reply["actions"][0], expected)
    assert reply["server_timing"]["infer_ms"] >= 0.0


# -- our client, an openpi-style server ----------------------------------------------------
class OpenpiStyleServer:
    """openpi's server conventions by hand: metadata first, then ``{"actions": ..}`` per
    observation, chunks of 10 float64 actions; ``mode`` makes it misbehave."""

    def __init__(self, metadata=None, mode="ok"):
        self.metadata, self.mode, self.received = metadata or {}, mode, []
        self.server = serve(self.handle, "127.0.0.1", 0, compression=None, max_size=None)
        self.url = f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def handle(self, ws):
        if self.mode == "silent":
            ws.recv()  # never sends metadata; waits for the client to give up
            return
        ws.send(openpi_packb(self.metadata))
        for frame in ws:
            obs = openpi_unpackb(frame)
            self.received.append(obs)
            ws.send(self.reply(obs))

    def reply(self, obs):
        if self.mode == "traceback":
            return "Traceback (most recent call last):\n  File \"x.py\"\nKeyError: 'image'"
        if self.mode == "error":
            return openpi_packb({"error": "out of GPU memory"})
        if self.mode == "no-actions":
            return openpi_packb({"action": [0.1, 0.2]})
        state = obs["state"].astype(np.float64)
        level = obs["images.primary"].mean() / 255.0
        return openpi_packb({"actions": np.tile(state * level, (10, 1)),
                             "server_timing": {"infer_ms": 0.1}})

    def close(self):
        self.server.shutdown()
        self.thread.join()


@pytest.fixture
def openpi_server(request):
    servers = []

    def start(metadata=None, mode="ok"):
        servers.append(OpenpiStyleServer(metadata, mode))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def observation(step=0):
    return {"episode_id": "e0", "step": step, "state": np.full(4, 0.5, np.float32),
            "images.primary": np.full((8, 8, 3), 51, np.uint8), "instruction": "reach",
            "images.wrist": np.zeros((8, 8, 3), np.uint8)}


def test_remote_policy_drives_an_openpi_style_server(openpi_server):
    server = openpi_server()  # openpi's default metadata: {}
    features = ["images.primary", "state", "instruction"]
    policy = loaded(RemotePolicy(server.url, protocol="metaworld-v1", features=features,
                                 chunk_size=5))
    assert policy.capabilities == Capabilities("metaworld-v1", tuple(features), chunk_size=5)
    policy.reset(CONTEXT)
    actions = policy.act(observation())
    assert actions.dtype == np.float32 and actions.shape == (10, 4)
    np.testing.assert_allclose(actions, np.full((10, 4), 0.1), rtol=1e-6)
    sent = server.received
    assert len(sent) == 1  # no reset frame: the server declared no reset
    assert sorted(sent[0]) == sorted(features)  # no episode_id, step or undeclared camera
    assert sent[0]["instruction"] == "reach"
    policy.end_episode("e0")
    policy.unload()


def test_remote_policy_names_what_it_misses_in_the_metadata(openpi_server):
    server = openpi_server()
    with pytest.raises(ValueError, match="declares no features; pass features="):
        RemotePolicy(server.url, protocol="metaworld-v1").preflight()
    with pytest.raises(ValueError, match="declares no protocol; pass protocol="):
        RemotePolicy(server.url, features=["state"]).preflight()
    declared = openpi_server({"protocol": "libero-v1", "features": ["state"]})
    with pytest.raises(ValueError, match="emits actions for protocol 'libero-v1', not "
                                         "'metaworld-v1'"):
        loaded(RemotePolicy(declared.url, protocol="metaworld-v1"))
    silent = openpi_server(mode="silent")
    start = time.perf_counter()
    with pytest.raises(InfrastructureError, match="sent no metadata within 0.5 s"):
        RemotePolicy(silent.url, protocol="metaworld-v1", features=["state"],
                     timeout_s=0.5).preflight()
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize("mode, error, match", [
    ("traceback", RemotePolicyError, "reported: KeyError: 'image'"),
    ("error", InfrastructureError, "out of GPU memory"),
    ("no-actions", InfrastructureError, "\"actions\" must be a non-empty numeric"),
])
def test_remote_policy_blames_the_right_party_for_a_bad_reply(openpi_server, mode, error,
                                                                match):
    server = openpi_server(mode=mode)
    policy = loaded(RemotePolicy(server.url, protocol="metaworld-v1",
                                 features=["images.primary", "state"]))
    policy.reset(CONTEXT)
    with pytest.raises(error, match=match) as caught:
        policy.act(observation())
    assert "\n" not in str(caught.value)
    if error is RemotePolicyError:
        assert not isinstance(caught.value, InfrastructureError)


# -- a server process killed mid-episode ---------------------------------------------------
SERVE_ZERO = ("import argparse, sys; from workbench.service.policy_server import "
              "run_policy_server; sys.exit(run_policy_server(argparse.Namespace(policy='zero', "
              "options={}, protocol='metaworld-v1', host='127.0.0.1', port=0)))")


@pytest.fixture
def server_process():
    proc = subprocess.Popen([sys.executable, "-c", SERVE_ZERO], stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    assert line.startswith("serving policy zero (metaworld-v1) on the workbench wire at "
                           "ws://127.0.0.1:"), line
    yield proc, line.split(" at ")[1].strip()
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


class KillAtStep(EpisodeObserver):
    def __init__(self, proc, step):
        self.proc, self.step = proc, step

    def on_act(self, step, observation, actions, seconds):
        if step == self.step:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


def test_a_server_killed_mid_episode_is_an_infrastructure_error(tmp_path, server_process):
    proc, url = server_process
    result = workbench.run(dict(REACH, episodes=2, max_steps=50, backend="sequential",
                                policy="remote", policy_options={"url": url, "timeout_s": 5},
                                output_dir=str(tmp_path)), observers=[KillAtStep(proc, 3)])
    df = result.results.sort_values("episode_id")
    assert proc.returncode == -signal.SIGKILL
    assert df["status"].tolist() == ["finished", "planned"]  # the next one never claimed
    first = df.iloc[0]
    assert (first["error_kind"], first["steps"]) == ("infrastructure", 4)  # four applied
    assert first["error_message"].startswith("step 4: policy server ws://127.0.0.1:") and \
        "closed the connection while waiting for actions" in first["error_message"]
    assert not result.report.complete
    assert "cannot connect to policy server" in result.report.failures[0]
    summary = workbench.summarize(df).set_index("task").loc["ALL"]
    assert summary["infra_errors"] == 1 and summary["policy_errors"] == 0


def test_the_server_process_stops_cleanly_on_sigterm(server_process):
    proc, url = server_process
    with connect(url, compression=None) as ws:
        assert decode(ws.recv(timeout=RECV_S))["policy"] == "zero"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=RECV_S)


# -- bad frames to our server ----------------------------------------------------------------
class RaisesOnNegativeState(Policy):
    """Zero actions, but raises a multi-line error when the state's first entry is < 0."""

    name = "raises"

    @property
    def capabilities(self):
        return Capabilities("metaworld-v1", ("state",))

    def _act(self, observation, episode_state):
        if observation["state"][0] < 0:
            raise RuntimeError("negative state\nsecond line of the error")
        return np.zeros(4, np.float32)


MAX_BYTES = 64 * 1024
GOOD = {"state": np.zeros(4, np.float32)}
OBJECT_ARRAY = {"state": {b"__ndarray__": True, b"data": b"\x00" * 8, b"dtype": "|O",
                          b"shape": [1]}}
BAD_FRAMES = [
    ("text", "hello", "expected a binary msgpack frame; got text"),
    ("garbage", b"\xc1\xff\x00garbage", "not msgpack"),
    ("not a map", encode([1, 2, 3]), "a request: expected a map; got list"),
    ("object dtype", msgpack.packb(OBJECT_ARRAY), "dtype '|O' may not cross the wire"),
    ("missing feature", encode({"images.primary": np.zeros((4, 4, 3), np.uint8)}),
     "observation lacks feature 'state'"),
    ("wrong dtype", encode({"state": np.zeros(4, np.float64)}), "expected dtype float32"),
    ("bad reset", encode({"reset": True}), "a reset needs an episode_id"),
]


def assert_clean_error(frame, blame, match):
    assert isinstance(frame, bytes)
    reply = decode(frame)
    assert set(reply) == {"error", "blame"} and reply["blame"] == blame
    assert match in reply["error"]
    assert "\n" not in reply["error"] and "Traceback" not in reply["error"] and \
        'File "' not in reply["error"]


def test_bad_frames_get_error_replies_and_the_server_keeps_serving():
    with serve_policy(RaisesOnNegativeState, max_frame_bytes=MAX_BYTES) as served:
        with connect(served.url, compression=None) as ws:
            ws.recv(timeout=RECV_S)  # metadata
            for _, frame, match in BAD_FRAMES:
                ws.send(frame)
                assert_clean_error(ws.recv(timeout=RECV_S), "request", match)
            ws.send(encode({"state": np.full(4, -1.0, np.float32)}))
            assert_clean_error(ws.recv(timeout=RECV_S), "policy",
                               "act: RuntimeError: negative state second line of the error")
            ws.send(encode(GOOD))  # the same connection is still served
            assert decode(ws.recv(timeout=RECV_S))["actions"].shape == (1, 4)
        with connect(served.url, compression=None) as ws:
            ws.recv(timeout=RECV_S)
            ws.send(encode({"state": np.zeros(MAX_BYTES, np.float32)}))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=RECV_S)
            assert closed.value.rcvd.code == 1009  # message too big
        policy = loaded(RemotePolicy(served.url))  # a normal client afterwards
        policy.reset(CONTEXT)
        np.testing.assert_array_equal(policy.act(observation()), np.zeros((1, 4), np.float32))
        with pytest.raises(RemotePolicyError, match="negative state second line"):
            policy.act(dict(observation(), state=np.full(4, -1.0, np.float32)))
        policy.end_episode("e0")
        policy.unload()


def test_episodes_of_several_connections_are_kept_apart():
    state = {"episode_id": "e0", "privileged.state": np.zeros(39, np.float32)}
    with serve_policy("expert") as served:
        first, second = loaded(RemotePolicy(served.url)), loaded(RemotePolicy(served.url))
        first.reset(CONTEXT)
        second.reset(CONTEXT)  # the same episode id from another client
        np.testing.assert_array_equal(first.act(state), second.act(state))
        with pytest.raises(RemotePolicyError, match="reset: ValueError: no scripted expert "
                                                    "for task 'no-such-task'"):
            first.reset(EpisodeContext("e1", "no-such-task", "", 0))
        np.testing.assert_array_equal(first.act(state), second.act(state))
        for policy in (first, second):
            policy.end_episode("e0")
            policy.unload()


def test_run_policy_server_refuses_an_unknown_policy():
    args = argparse.Namespace(policy="no-such-policy", options={}, protocol=None,
                              host="127.0.0.1", port=0)
    with pytest.raises(ValueError, match="unknown policy 'no-such-policy'"):
        run_policy_server(args)
