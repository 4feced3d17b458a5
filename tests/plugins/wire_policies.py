"""One deterministic policy, in every ecosystem's form, for the wire tests.

``gain_actions(state)`` is the policy: ``tanh(-3 * state)`` resized to the action size,
repeated ``chunk`` times. It is wrapped as a workbench :class:`StateGain` (run
in-process, or served by ``workbench serve-policy``), as an openpi ``BasePolicy`` served
by openpi's own ``WebsocketPolicyServer`` (openpi-server, from PyPI), and as a vla-eval
``PredictModelServer`` served by vla-eval's own ``run_server``; so a run through any wire
can be compared action for action with the run in-process. :class:`WorkbenchMetaWorld`
is a vla-eval ``StepBenchmark`` (vla-eval ships no MetaWorld) over the workbench's own
MetaWorld adapter, so ``vla-eval run`` sees exactly the episodes ``workbench eval`` does,
and writes the actions it applied to ``actions_dir``.

Run as a script to start a server: ``python -m wire_policies openpi PORT KEY DIM`` or
``python -m wire_policies vla-eval PORT KEY DIM`` (KEY: the state key in their request).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from workbench import Capabilities, Policy, get_protocol


def gain_actions(state: Any, dim: int, chunk: int = 1) -> np.ndarray:
    """The policy: (chunk, dim) float32."""
    action = np.tanh(np.resize(np.float32(-3.0) * np.asarray(state, np.float32), dim))
    return np.repeat(action.astype(np.float32)[None], chunk, axis=0)


class StateGain(Policy):
    """:func:`gain_actions` of ``feature``; also reads ``extra`` features (unused), so a
    preset's images and instruction travel as a model's would."""

    name = "state-gain"

    def __init__(self, protocol: str, feature: str = "state", chunk_size: int = 1,
                 extra: tuple = (), fail_below: float | None = None) -> None:
        super().__init__()
        self.protocol, self.feature, self.chunk = protocol, feature, chunk_size
        self.extra, self.fail_below = tuple(extra), fail_below
        self.dim = get_protocol(protocol).action.dim

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(self.protocol, (self.feature, *self.extra), chunk_size=self.chunk,
                            native_batching=True, max_batch=64)

    def _act(self, observation, episode_state):
        return self._act_batch([observation], [episode_state])[0]

    def _act_batch(self, observations, episode_states):
        out = []
        for obs in observations:
            if self.fail_below is not None and float(obs[self.feature][0]) < self.fail_below:
                raise RuntimeError(f"poisoned state {float(obs[self.feature][0])}")
            out.append(gain_actions(obs[self.feature], self.dim, self.chunk))
        return out


def openpi_server(port: int, key: str, dim: int, chunk: int = 10) -> None:
    """openpi's own server (openpi-server) over :func:`gain_actions` of ``key``."""
    from openpi_client import base_policy
    from openpi_server import WebsocketPolicyServer

    class Gain(base_policy.BasePolicy):
        def infer(self, obs):
            return {"actions": gain_actions(obs[key], dim, chunk)}

    WebsocketPolicyServer(Gain(), host="127.0.0.1", port=port,
                          metadata={"model": "gain"}).serve_forever()


def vla_eval_server(port: int, key: str, dim: int) -> None:
    """vla-eval's own server loop over a PredictModelServer of :func:`gain_actions`."""
    from vla_eval.model_servers.predict import PredictModelServer
    from vla_eval.model_servers.serve import serve

    class Gain(PredictModelServer):
        def predict(self, obs, ctx):
            return {"actions": gain_actions(obs[key], dim)[0]}

    serve(Gain(), host="127.0.0.1", port=port)


try:
    from vla_eval.benchmarks.base import StepBenchmark, StepResult
except ImportError:  # vla-eval is a test dependency; the module imports without it
    StepBenchmark, StepResult = object, None


class WorkbenchMetaWorld(StepBenchmark):  # type: ignore[misc, valid-type]
    """MetaWorld MT10 through the workbench's adapter, in vla-eval's conventions (the
    ``vla-eval/metaworld`` preset's keys); the applied actions go to ``actions_dir``."""

    render_backends = frozenset({"gpu", "cpu"})

    @classmethod
    def configure_render(cls, mode: str) -> dict[str, str]:
        import os

        os.environ.setdefault("MUJOCO_GL", "egl")
        return {"MUJOCO_GL": os.environ["MUJOCO_GL"]}

    def __init__(self, tasks: list = ("reach-v3",), image_size: int = 32, max_steps: int = 40,
                 send_wrist_image: bool = False, actions_dir: str = "") -> None:
        super().__init__()
        self.names, self.image_size, self.max_steps = list(tasks), image_size, max_steps
        self.send_wrist_image, self.actions_dir = send_wrist_image, actions_dir
        self.adapter: Any = None

    def get_tasks(self):
        from workbench.benchmarks.metaworld_tasks import INSTRUCTIONS

        return [{"name": t, "instruction": INSTRUCTIONS[t]} for t in self.names]

    def reset(self, task):
        from workbench import EpisodeSpec, make_benchmark

        if self.adapter is None:
            self.adapter = make_benchmark("metaworld", suite="MT10", image_size=self.image_size)
        index = int(task.get("episode_idx", 0))
        self.episode = EpisodeSpec("metaworld", "MT10", task["name"], index, index)
        self.adapter.reset(self.episode)
        self.applied: list = []
        return None

    def step(self, action):
        applied = np.asarray(action["actions"], np.float32).reshape(-1)
        self.applied.append(applied)
        result = self.adapter.step(applied)
        done = result.done or len(self.applied) >= self.max_steps
        if done and self.actions_dir:
            name = f"{self.episode.task}-{self.episode.episode_index}.npy"
            np.save(Path(self.actions_dir) / name, np.stack(self.applied))
        return StepResult(obs=None, reward=result.reward, done=done,
                          info={"success": result.success})

    def make_obs(self, raw_obs, task):
        cameras = ["images.primary"] + (["images.wrist"] if self.send_wrist_image else [])
        seen = self.adapter.observe([*cameras, "state", "instruction"])
        return {"images": {c.split(".")[1]: seen[c] for c in cameras},
                "states": seen["state"], "task_description": seen["instruction"]}

    def check_done(self, step_result):
        return step_result.done

    def get_step_result(self, step_result):
        return {"success": bool(step_result.info["success"])}

    def get_metadata(self):
        return {"max_steps": self.max_steps}

    def cleanup(self):
        if self.adapter is not None:
            self.adapter.close()


if __name__ == "__main__":
    kind, port, key, dim = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    (openpi_server if kind == "openpi" else vla_eval_server)(port, key, dim)
