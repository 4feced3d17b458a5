"""vla-eval model server wrapping MetaWorld's scripted experts, with vla-eval's batching.

Built on ``vla_eval.model_servers.predict.PredictModelServer``: with
``max_batch_size > 1`` vla-eval queues observations from all connected shards and
calls :meth:`MetaWorldExpertServer.predict_batch` with up to ``max_batch_size`` of
them, waiting at most ``max_wait_time`` seconds (after each batch) for a partial
batch to fill.  With ``max_batch_size == 1`` vla-eval calls ``predict()`` per
observation, which here delegates to ``predict_batch([obs])``.

The expert reads ``obs["privileged_state"]`` (the 39-D MetaWorld observation) and
``obs["task_name"]`` (env name); ``metaworld.policies.ENV_POLICY_MAP[name]()``
``.get_action(obs39)`` returns the 4-D action, clipped to [-1, 1].

Extra per-batch cost hook (e.g. a torch CNN, to emulate a learned policy's
inference): ``extra_cost(obs_batch)`` is called once per batch, in vla-eval's
inference thread, before the expert actions are computed.  Supply it as

* ``extra_cost``: a callable, or an import string ``"module:attr"`` / ``"module.attr"``
  naming one; or
* ``extra_cost_factory`` (import string) + ``extra_cost_kwargs`` (dict): the
  factory is called once at construction, ``factory(**kwargs)``, and must return
  the callable (so weights are built once).  :func:`make_torch_cnn_cost` is an
  example factory.

Run it (what ``vla-eval serve`` does, minus ``uv run``, which needs uv)::

    PYTHONPATH=/work/main/benchmarks /work/main/.venv/bin/python \
        /work/main/benchmarks/vla_eval_expert_server.py --address 127.0.0.1:8765 \
        --args.max_batch_size=4 --args.max_wait_time=0.01
    # or: ... vla_eval_expert_server.py --config vla_eval_configs/expert_server.yaml

``GET http://host:port/config?max_batch_size=8&max_wait_time=0.005`` changes the two
batching knobs at runtime (vla-eval's control plane); ``GET /health`` = ready.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import threading
import time
from collections import Counter
from typing import Any, Callable, Optional

import numpy as np

from vla_eval.model_servers.base import SessionContext
from vla_eval.model_servers.predict import PredictModelServer
from vla_eval.specs import IMAGE_RGB, LANGUAGE, POSITION_DELTA, DimSpec

logger = logging.getLogger(__name__)

GRIPPER_METAWORLD = DimSpec("gripper", 1, "metaworld_gripper", (-1, 1), description="+1 closes, -1 opens")
PRIVILEGED_STATE = DimSpec("privileged_state", 39, "metaworld_obs39")


def resolve_callable(spec: Any) -> Callable[..., Any]:
    """A callable, or ``"pkg.mod:attr"`` / ``"pkg.mod.attr"`` naming one."""
    if callable(spec):
        return spec
    if not isinstance(spec, str) or not spec:
        raise TypeError(f"expected a callable or an import string, got {spec!r}")
    if ":" in spec:
        mod, _, attr = spec.partition(":")
    else:
        mod, _, attr = spec.rpartition(".")
    obj: Any = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec} is not callable")
    return obj


class MetaWorldExpertServer(PredictModelServer):
    """Privileged scripted-expert "model" for MetaWorld, served by vla-eval.

    Args:
        max_batch_size: vla-eval batching: max observations per ``predict_batch`` call.
        max_wait_time: vla-eval batching: seconds to wait for a partial batch to fill.
        extra_cost: callable or import string; called as ``extra_cost(obs_batch)``.
        extra_cost_factory: import string of a factory returning the per-batch callable.
        extra_cost_kwargs: kwargs for ``extra_cost_factory``.
        clip: clip expert actions to [-1, 1].
        stats_path: if set, a JSON file rewritten at every episode end with batch
            statistics (batch-size histogram, predict / extra-cost seconds).
    """

    def __init__(
        self,
        max_batch_size: int = 1,
        max_wait_time: float = 0.01,
        extra_cost: Any = None,
        extra_cost_factory: Optional[str] = None,
        extra_cost_kwargs: Optional[dict] = None,
        clip: bool = True,
        stats_path: Optional[str] = None,
        chunk_size: Optional[int] = None,
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, max_wait_time=max_wait_time,
                         chunk_size=chunk_size)
        from metaworld.policies import ENV_POLICY_MAP

        self._policy_map = ENV_POLICY_MAP
        self._policies: dict[str, Any] = {}
        self._session_task: dict[str, str] = {}
        self.clip = clip
        self._extra_cost: Optional[Callable[[list], Any]] = None
        if extra_cost is not None and extra_cost_factory is not None:
            raise ValueError("pass extra_cost or extra_cost_factory, not both")
        if extra_cost is not None:
            self._extra_cost = resolve_callable(extra_cost)
        elif extra_cost_factory is not None:
            self._extra_cost = resolve_callable(extra_cost_factory)(**(extra_cost_kwargs or {}))
        self.stats_path = stats_path
        self._stats_lock = threading.Lock()
        self._batch_hist: Counter[int] = Counter()
        self._n_obs = 0
        self._predict_s = 0.0
        self._extra_cost_s = 0.0
        self._t_first: Optional[float] = None
        self._t_last: Optional[float] = None
        self._episodes_ended = 0

    # -- specs (sent in HELLO; the orchestrator warns on mismatch) --------

    def get_action_spec(self) -> dict[str, DimSpec]:
        return {"position": POSITION_DELTA, "gripper": GRIPPER_METAWORLD}

    def get_observation_spec(self) -> dict[str, DimSpec]:
        return {"privileged_state": PRIVILEGED_STATE, "corner": IMAGE_RGB, "language": LANGUAGE}

    # -- inference ---------------------------------------------------------

    def _policy(self, name: str) -> Any:
        pol = self._policies.get(name)
        if pol is None:
            pol = self._policies[name] = self._policy_map[name]()
        return pol

    def predict_batch(self, obs_batch: list[dict[str, Any]], ctx_batch: list[SessionContext]) -> list[dict[str, Any]]:
        t0 = time.monotonic()
        t_cost = 0.0
        if self._extra_cost is not None:
            self._extra_cost(obs_batch)
            t_cost = time.monotonic() - t0
        out = []
        for obs, ctx in zip(obs_batch, ctx_batch):
            name = obs.get("task_name") or self._session_task.get(ctx.session_id)
            if name is None:
                raise KeyError("observation has no 'task_name' and no task was announced at episode start")
            a = np.asarray(self._policy(name).get_action(np.asarray(obs["privileged_state"], dtype=np.float64)))
            if self.clip:
                a = np.clip(a, -1.0, 1.0)
            if self.chunk_size:  # the expert's action held over the chunk (open loop)
                a = np.repeat(a[None], self.chunk_size, axis=0)
            out.append({"actions": a.astype(np.float32)})
        t1 = time.monotonic()
        with self._stats_lock:
            self._batch_hist[len(obs_batch)] += 1
            self._n_obs += len(obs_batch)
            self._predict_s += t1 - t0
            self._extra_cost_s += t_cost
            self._t_first = t0 if self._t_first is None else self._t_first
            self._t_last = t1
        return out

    # -- episode lifecycle -------------------------------------------------

    async def on_episode_start(self, config: dict[str, Any], ctx: SessionContext) -> None:
        task = config.get("task") or {}
        if "name" in task:
            self._session_task[ctx.session_id] = str(task["name"])
        await super().on_episode_start(config, ctx)

    async def on_episode_end(self, result: dict[str, Any], ctx: SessionContext) -> None:
        await super().on_episode_end(result, ctx)
        self._episodes_ended += 1
        self.write_stats()

    def stats(self) -> dict[str, Any]:
        with self._stats_lock:
            n_batches = sum(self._batch_hist.values())
            return {
                "max_batch_size": self.max_batch_size,
                "max_wait_time": self.max_wait_time,
                "n_obs": self._n_obs,
                "n_batches": n_batches,
                "mean_batch": (self._n_obs / n_batches) if n_batches else 0.0,
                "batch_hist": {str(k): v for k, v in sorted(self._batch_hist.items())},
                "predict_s": self._predict_s,
                "extra_cost_s": self._extra_cost_s,
                "busy_span_s": (self._t_last - self._t_first) if self._t_first is not None else 0.0,
                "episodes_ended": self._episodes_ended,
            }

    def write_stats(self) -> None:
        if not self.stats_path:
            return
        tmp = f"{self.stats_path}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.stats(), f, indent=1)
        os.replace(tmp, self.stats_path)


# ---------------------------------------------------------------------------
# Example extra-cost factory
# ---------------------------------------------------------------------------


def make_workbench_vision_cost(chunk_size: int = 8, num_threads: int = 1) -> Callable[[list], Any]:
    """``extra_cost_factory`` running the workbench's VisionPolicy network on both cameras,
    state and instruction: the same cost the workbench's ``expert-vision-cost`` pays."""
    import torch

    from workbench.contracts import LoadContext
    from workbench.policies.vision import VisionPolicy

    torch.set_num_threads(int(num_threads))
    policy = VisionPolicy("metaworld-v1", chunk_size)
    policy.load(LoadContext("metaworld-v1"))

    def cost(obs_batch: list) -> Any:
        return policy.forward([{"images.primary": np.asarray(o["images"]["corner"]),
                                "images.wrist": np.asarray(o["images"]["gripperPOV"]),
                                "state": np.asarray(o["state"], np.float32),
                                "instruction": str(o["task_description"])} for o in obs_batch])

    return cost


def make_torch_cnn_cost(
    width: int = 32,
    depth: int = 4,
    image_key: str = "corner",
    num_threads: Optional[int] = None,
    device: str = "cpu",
    seed: int = 0,
) -> Callable[[list], Any]:
    """Example ``extra_cost_factory``: a small randomly initialised conv net run on the
    batch of ``obs["images"][image_key]`` (uint8 HWC) -> returns the feature tensor."""
    import torch
    from torch import nn

    if num_threads is not None:
        torch.set_num_threads(int(num_threads))
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    c_in = 3
    for _ in range(depth):
        layers += [nn.Conv2d(c_in, width, 3, stride=2, padding=1), nn.ReLU()]
        c_in = width
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten()).to(device).eval()

    def cost(obs_batch: list) -> Any:
        imgs = np.stack([np.asarray(o["images"][image_key]) for o in obs_batch])
        x = torch.from_numpy(imgs).to(device).permute(0, 3, 1, 2).float().div_(255.0)
        with torch.inference_mode():
            return net(x)

    return cost


if __name__ == "__main__":
    from vla_eval.model_servers.serve import run_server

    run_server(MetaWorldExpertServer)
