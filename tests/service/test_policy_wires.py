"""The openpi and vla-eval wires in both directions, each tested with the other side's own
code: openpi-client's WebsocketClientPolicy and ActionChunkBroker and openpi's
WebsocketPolicyServer (openpi-server), vla-eval's runner (``vla-eval run``) and its
PredictModelServer. Servers run as real processes on loopback through the real CLI; the
policy is one deterministic function in every form (tests/plugins/wire_policies.py), so
every remote run is compared action for action with the same policy run in-process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml
from websockets.sync.server import serve

import workbench
from workbench.contracts.wire import decode, encode
from workbench.runtime.episode import EpisodeObserver

action_chunk_broker = pytest.importorskip("openpi_client.action_chunk_broker")
websocket_client_policy = pytest.importorskip("openpi_client.websocket_client_policy")
image_tools = pytest.importorskip("openpi_client.image_tools")
pytest.importorskip("openpi_server")
pytest.importorskip("vla_eval")

from wire_policies import gain_actions  # noqa: E402  (tests/plugins, on the path)

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = str(ROOT / "tests" / "plugins")
BIN = Path(sys.executable).parent
START_S = 120  # a server process imports torch and the simulators on a loaded machine
RNG = np.random.default_rng(7)
METAWORLD = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=3,
                 max_steps=30, progress=False)
LIBERO = dict(benchmark="libero", suite="libero_spatial", episodes=1, max_steps=20,
              image_size=256, progress=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment() -> dict[str, str]:
    return os.environ | {"PYTHONPATH": os.pathsep.join(
        p for p in (PLUGINS, os.environ.get("PYTHONPATH")) if p), "MUJOCO_GL": "egl"}


class Process:
    """A server process; ``url`` once it listens (the workbench prints it; the others'
    readiness is polled over HTTP)."""

    def __init__(self, args: list[str], port: int | None = None, health: str = "/healthz"):
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=environment(), cwd=ROOT)
        if port is None:
            line = self.proc.stdout.readline()
            assert " at ws://" in line, line + self.proc.stderr.read()
            self.url = line.rsplit(" at ", 1)[1].strip()
        else:
            self.url = f"ws://127.0.0.1:{port}"
            self._wait_http(port, health)

    def _wait_http(self, port: int, path: str) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.stderr.read()
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2).read()
                return
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"no server on port {port} within {START_S} s")

    def stats(self) -> dict:
        port = self.url.rsplit(":", 1)[1]
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats",
                                                 timeout=5).read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def serve_policy_cli(*args: str) -> Process:
    return Process([str(BIN / "workbench"), "serve-policy", *args, "--port", "0"])


def their_server(kind: str, key: str, dim: int) -> Process:
    port = free_port()
    return Process([sys.executable, "-m", "wire_policies", kind, str(port), key, str(dim)],
                   port, "/healthz" if kind == "openpi" else "/health")


@pytest.fixture
def processes():
    started: list[Process] = []
    yield started
    for proc in started:
        proc.stop()


def libero_element(step: int) -> dict:
    """What openpi's LIBERO example sends: 256-px frames turned 180 degrees, resized with
    padding to 224, the 8-D float64 state, the prompt."""
    frames = [RNG.integers(0, 256, (256, 256, 3), dtype=np.uint8)[::-1, ::-1] for _ in "ab"]
    image, wrist = (image_tools.convert_to_uint8(image_tools.resize_with_pad(
        np.ascontiguousarray(f), 224, 224)) for f in frames)
    return {"observation/image": image, "observation/wrist_image": wrist,
            "observation/state": np.concatenate([RNG.normal(size=6), [0.04, -0.04]]),
            "prompt": "pick up the black bowl and place it on the plate"}


# -- openpi's clients against `workbench serve-policy --wire openpi` ------------------------


def test_openpis_client_and_chunk_broker_drive_a_libero_policy_for_20_steps(processes):
    server = serve_policy_cli(
        "wire_policies:StateGain", "--set", "feature=state.eef8", "--set", "chunk_size=2",
        "--set", "extra=[images.primary, images.wrist, instruction]",
        "--protocol", "libero-v1", "--wire", "openpi", "--min-chunk", "5")
    processes.append(server)
    client = websocket_client_policy.WebsocketClientPolicy(server.url)
    metadata = client.get_server_metadata()
    assert metadata["preset"] == "openpi/libero" and metadata["returned_chunk"] == 5
    assert metadata["padded"] is True and metadata["chunk_size"] == 2
    broker = action_chunk_broker.ActionChunkBroker(client, action_horizon=5)
    asked = None
    for step in range(20):
        element = libero_element(step)
        if step % 5 == 0:
            asked = element["observation/state"]
        action = broker.infer(element)["actions"]  # openpi's own line
        assert action.shape == (7,) and action.dtype == np.float32
        np.testing.assert_array_equal(action, gain_actions(asked, 7)[0])
    stats = server.stats()
    assert stats["requests"] == 4 and stats.get("errors_request", 0) == 0


def aloha_element() -> dict:
    """What openpi's aloha_sim example sends: the top camera resized with padding to 224,
    channels first, and the 14 joint values."""
    top = RNG.integers(0, 256, (480, 640, 3), dtype=np.uint8)
    image = image_tools.convert_to_uint8(image_tools.resize_with_pad(top, 224, 224))
    return {"images": {"cam_high": np.transpose(image, (2, 0, 1))},
            "state": RNG.uniform(-1, 1, 14)}


def test_openpis_aloha_sim_element_drives_an_aloha_policy(processes):
    server = serve_policy_cli(
        "wire_policies:StateGain", "--set", "extra=[images.head]", "--protocol",
        "robotwin2-v1", "--wire", "openpi", "--min-chunk", "10")
    processes.append(server)
    client = websocket_client_policy.WebsocketClientPolicy(server.url)
    assert client.get_server_metadata()["preset"] == "openpi/aloha"
    broker = action_chunk_broker.ActionChunkBroker(client, action_horizon=10)
    for step in range(20):
        element = aloha_element()
        if step % 10 == 0:
            asked = element["state"]
        np.testing.assert_array_equal(broker.infer(element)["actions"],
                                      gain_actions(asked, 14)[0])
    assert server.stats()["requests"] == 2


def test_a_request_openpi_would_refuse_gets_openpis_error_form(processes):
    server = serve_policy_cli("wire_policies:StateGain", "--set", "feature=state.eef8",
                              "--protocol", "libero-v1", "--wire", "openpi")
    processes.append(server)
    client = websocket_client_policy.WebsocketClientPolicy(server.url)
    element = libero_element(0)
    element["observation/state"] = element["observation/state"][:7]
    with pytest.raises(RuntimeError) as raised:  # openpi-client's own error on a text frame
        client.infer(element)
    text = str(raised.value)
    assert text.startswith("Error in inference server:\nTraceback (most recent call last):")
    assert text.rstrip().endswith("observation/state: expected float64 (8,); got float64 (7,)")


# -- vla-eval's runner against `workbench serve-policy --wire vla-eval` ------------------------


def in_process(tmp_path, name: str, config: dict, **policy) -> workbench.EvalRun:
    return workbench.run(config | {"policy": "wire_policies:StateGain", "policy_options": policy,
                                   "output_dir": str(tmp_path / name)})


def actions_of(run: workbench.EvalRun) -> list[np.ndarray]:
    return [np.load(p)["actions"] for p in run.results.sort_values("episode_id")["rollout_path"]]


def test_vla_evals_own_runner_drives_serve_policy_and_gets_the_in_process_actions(
        tmp_path, processes):
    server = serve_policy_cli("wire_policies:StateGain",
                              "--set", "extra=[images.primary, instruction]",
                              "--protocol", "metaworld-v1", "--wire", "vla-eval")
    processes.append(server)
    applied = tmp_path / "applied"
    applied.mkdir()
    config = {"server": {"url": server.url, "timeout": 60}, "output_dir": str(tmp_path / "out"),
              "render": "cpu", "benchmarks": [{
                  "benchmark": "wire_policies:WorkbenchMetaWorld", "name": "wb", "mode": "sync",
                  "episodes_per_task": 2, "tasks": ["reach-v3"], "max_steps": 30,
                  "params": {"tasks": ["reach-v3"], "image_size": 32, "max_steps": 30,
                             "actions_dir": str(applied)}}]}
    (tmp_path / "eval.yaml").write_text(yaml.safe_dump(config))
    done = subprocess.run([str(BIN / "vla-eval"), "run", "--no-docker", "-c",
                           str(tmp_path / "eval.yaml")], capture_output=True, text=True,
                          env=environment(), timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[2/2] reach-v3 ep1" in done.stderr + done.stdout
    local = in_process(tmp_path, "local", METAWORLD | {"episodes": 2, "image_size": 32},
                       extra=["images.primary", "instruction"])
    for k, expected in enumerate(actions_of(local)):
        np.testing.assert_array_equal(np.load(applied / f"reach-v3-{k}.npy"), expected)
    assert server.stats()["requests"] == 60


# -- `policy: openpi` and `policy: vla-eval` against the ecosystems' own servers ---------------


def eval_cli(tmp_path, name: str, config: dict) -> subprocess.CompletedProcess:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config | {"output_dir": str(tmp_path / name)}))
    return subprocess.run([str(BIN / "workbench"), "eval", str(path)], capture_output=True,
                          text=True, env=environment(), timeout=600, cwd=tmp_path)


OUTCOME = ["episode_id", "success", "terminal_step", "steps", "error_kind"]


def assert_same_run(tmp_path, name: str, local: workbench.EvalRun) -> None:
    remote = workbench.load_results(tmp_path / name / "records.sqlite").sort_values("episode_id")
    assert remote[OUTCOME].reset_index(drop=True).equals(
        local.results.sort_values("episode_id")[OUTCOME].reset_index(drop=True))
    assert remote["error_kind"].isna().all()
    for path, expected in zip(remote["rollout_path"], actions_of(local)):
        np.testing.assert_array_equal(np.load(path)["actions"], expected)


@pytest.mark.parametrize("wire, key", [("openpi", "observation/state"), ("vla-eval", "states")])
def test_an_eval_through_their_server_has_the_in_process_outcomes_on_metaworld(
        tmp_path, processes, wire, key):
    server = their_server(wire, key, 4)
    processes.append(server)
    chunk = 5 if wire == "openpi" else 1
    config = METAWORLD | {"image_size": 224 if wire == "openpi" else 32,
                          "backend": "pool", "pool": {"workers": 2}}
    done = eval_cli(tmp_path, "remote", config | {"policy": wire,
                                                  "policy_options": {"url": server.url}})
    assert done.returncode == 0, done.stderr[-3000:]
    local = in_process(tmp_path, "local", config | {"backend": "sequential"}, chunk_size=chunk)
    assert_same_run(tmp_path, "remote", local)


@pytest.mark.parametrize("wire, key", [("openpi", "observation/state"), ("vla-eval", "states")])
def test_an_eval_through_their_server_has_the_in_process_outcome_on_libero(
        tmp_path, processes, wire, key):
    from workbench.benchmarks import benchmark_class

    config = LIBERO | {"tasks": benchmark_class("libero").suite_tasks("libero_spatial")[:1]}
    server = their_server(wire, key, 7)
    processes.append(server)
    done = eval_cli(tmp_path, "remote", config | {"policy": wire,
                                                  "policy_options": {"url": server.url}})
    assert done.returncode == 0, done.stderr[-3000:]
    local = in_process(tmp_path, "local", config, feature="state.eef8",
                       chunk_size=5 if wire == "openpi" else 1)
    assert_same_run(tmp_path, "remote", local)


# -- faults, through the real CLI --------------------------------------------------------------


def test_keys_the_server_does_not_know_stop_the_run_before_any_claim(tmp_path, processes):
    server = their_server("openpi", "observation/state", 4)
    processes.append(server)
    done = eval_cli(tmp_path, "bad", METAWORLD | {"image_size": 32, "policy": "openpi",
                                                  "policy_options": {"url": server.url, "keys": {
                                                      "obs/state": "state"}}})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"workbench eval: error: preflight request refused: openpi server {server.url} "
        "reported: KeyError: 'observation/state'; preset openpi/keys sends obs/state float32 (4,)"]
    records = workbench.load_results(tmp_path / "bad" / "records.sqlite")
    assert records["status"].eq("planned").all(), "nothing was claimed"


class Misbehaving:
    """An openpi-style server that answers the first ``good`` requests (the handshake),
    then sends ``then``: ``"garbage"`` frames, or nothing (``"hang"``)."""

    def __init__(self, then: str, good: int = 1) -> None:
        self.then, self.good, self.seen = then, good, 0
        self.closing = threading.Event()
        self.server = serve(self.handle, "127.0.0.1", 0)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}"

    def handle(self, ws):
        ws.send(encode({}))
        for frame in ws:
            self.seen += 1
            state = decode(frame)["observation/state"]
            if self.seen <= self.good:
                ws.send(encode({"actions": gain_actions(state, 4, 5)}))
            elif self.then == "garbage":
                ws.send(b"\xc1\xc1 not msgpack")
            else:
                self.closing.wait(60)  # never answers

    def close(self):
        self.closing.set()
        self.server.shutdown()


@pytest.mark.parametrize("then, kind, message", [
    ("garbage", "policy", "replied malformed frame: not msgpack"),
    ("hang", "infrastructure", "sent no actions within 2 s"),
])
def test_a_server_that_replies_garbage_or_hangs_is_blamed_rightly(tmp_path, then, kind,
                                                                     message):
    server = Misbehaving(then)
    try:
        done = eval_cli(tmp_path, "run", METAWORLD | {
            "episodes": 2, "image_size": 224, "policy": "openpi",
            "policy_options": {"url": server.url, "timeout_s": 2}})
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-3000:]
    records = workbench.load_results(tmp_path / "run" / "records.sqlite")
    assert records["error_kind"].tolist() == [kind, kind]
    assert all(message in m and m.startswith("step 0: ") for m in records["error_message"])


class KillAt(EpisodeObserver):
    def __init__(self, proc, step):
        self.proc, self.step, self.done = proc, step, False

    def on_act(self, step, observation, actions, seconds):
        if step == self.step and not self.done:
            self.done = True
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


def test_a_server_killed_mid_episode_fails_that_episode_and_stops_the_run(tmp_path,
                                                                         processes):
    server = their_server("vla-eval", "states", 4)
    processes.append(server)
    run = workbench.run(METAWORLD | {"image_size": 32, "policy": "vla-eval",
                                     "policy_options": {"url": server.url, "timeout_s": 5},
                                     "output_dir": str(tmp_path)},
                        observers=[KillAt(server.proc, 5)])
    df = run.results.sort_values("episode_id")
    assert df["status"].tolist() == ["finished", "planned", "planned"]  # the rest not burnt
    assert df["error_kind"].iloc[0] == "infrastructure" and df["steps"].iloc[0] == 6
    first = df["error_message"].iloc[0]
    assert first.startswith("step 6: ") and "closed the connection" in first
    assert not run.report.complete  # the run stopped, naming the server
    assert "cannot connect to policy server" in run.report.failures[0]


# -- batching across connections -------------------------------------------------------------


def ask_together(url: str, states: list, poisoned: int | None = None) -> dict:
    """Each state from a client of its own, all sent at once; the replies (or the error
    each client raised)."""
    clients = [websocket_client_policy.WebsocketClientPolicy(url) for _ in states]
    start, replies = threading.Barrier(len(clients)), {}

    def ask(k: int) -> None:
        state = np.full(4, -1.0, np.float32) if k == poisoned else states[k]
        start.wait()
        try:
            replies[k] = clients[k].infer({"observation/state": state})["actions"]
        except RuntimeError as exc:  # openpi-client's error on a text frame
            replies[k] = exc

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return replies


def test_concurrent_clients_are_batched_and_a_poisoned_request_fails_alone():
    from workbench.service.policy_server import serve_policy

    states = [np.full(4, 0.1 * (k + 1), np.float32) for k in range(4)]
    with serve_policy("wire_policies:StateGain", {"fail_below": -0.5, "chunk_size": 5},
                      protocol="metaworld-v1", wire="openpi",
                      keys={"observation/state": "state"}, max_batch=4,
                      max_wait_ms=2000) as served:  # a full batch goes at once; the wait
        # only bounds how late a slow client may join (a loaded 2-core machine is slow)
        clean = ask_together(served.url, states)
        stats = served.stats()
        assert stats["largest_batch"] > 1, stats  # one act_batch served several connections
        for k, state in enumerate(states):
            np.testing.assert_array_equal(clean[k], gain_actions(state, 4, 5))
        dirty = ask_together(served.url, states, poisoned=2)
        assert isinstance(dirty[2], RuntimeError)
        assert str(dirty[2]).rstrip().endswith("act: RuntimeError: poisoned state -1.0")
        for k in (0, 1, 3):
            np.testing.assert_array_equal(dirty[k], clean[k])
        assert served.stats().get("batches_retried_one_by_one", 0) >= 1


# -- openpi's own runtime loop, as its aloha_sim example runs it, over real gym-aloha ---------


def test_openpis_runtime_loop_drives_serve_policy_on_real_gym_aloha(processes):
    """openpi-client's Runtime, PolicyAgent and ActionChunkBroker (the aloha_sim example's
    loop) over gym-aloha's own environment, its observation turned as that example turns
    it; the served policy's actions reach the simulator."""
    gymnasium = pytest.importorskip("gymnasium")
    pytest.importorskip("gym_aloha")
    from openpi_client.runtime import environment, runtime
    from openpi_client.runtime.agents import policy_agent

    server = serve_policy_cli("wire_policies:StateGain", "--set", "extra=[images.head]",
                              "--protocol", "robotwin2-v1", "--wire", "openpi",
                              "--min-chunk", "10")
    processes.append(server)

    class GymAloha(environment.Environment):
        def __init__(self):
            self.gym = gymnasium.make("gym_aloha/AlohaTransferCube-v0",
                                      obs_type="pixels_agent_pos")
            self.applied, self.steps = [], 0

        def reset(self):
            self.obs, _ = self.gym.reset(seed=0)
            self.steps = 0

        def is_episode_complete(self):
            return self.steps >= 20

        def get_observation(self):
            image = image_tools.convert_to_uint8(
                image_tools.resize_with_pad(self.obs["pixels"]["top"], 224, 224))
            return {"state": self.obs["agent_pos"],
                    "images": {"cam_high": np.transpose(image, (2, 0, 1))}}

        def apply_action(self, action):
            self.applied.append((self.obs["agent_pos"].copy(), action["actions"]))
            self.obs, *_ = self.gym.step(action["actions"])
            self.steps += 1

    env = GymAloha()
    agent = policy_agent.PolicyAgent(action_chunk_broker.ActionChunkBroker(
        websocket_client_policy.WebsocketClientPolicy(server.url), action_horizon=10))
    runtime.Runtime(environment=env, agent=agent, subscribers=[], num_episodes=1).run()
    assert len(env.applied) == 20 and server.stats()["requests"] == 2
    for k, (_, action) in enumerate(env.applied):
        asked = env.applied[k - k % 10][0]  # the state the chunk was asked for
        np.testing.assert_array_equal(action, gain_actions(asked, 14)[0])
