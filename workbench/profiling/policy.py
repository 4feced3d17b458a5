"""Where a vision policy's inference time goes: wall time and kernel time per stage.

:func:`staged_forward` is ``VisionPolicy.forward`` split into the network's stages,
each inside a ``torch.profiler.record_function`` label: "Preprocessing"
(``policy.preprocess``), "Vision encoder" (``net.encoder``), "State and instruction
encoders" (``net.state``, ``net.words``), "Action head" (``net.head``), all inside
"Whole inference" (which also copies the actions back to the host).

:func:`profile_policy_stages` runs it twice per repeat: once timed stage by stage
(synchronizing the device around each stage) for wall time, once under
``torch.profiler`` for kernel time, attributing each profiled op to the stage label
that encloses it. Kernel time is the ops' self CPU time on CPU and their CUDA kernel
time on GPU; "GPU busy" is CUDA kernel time over wall time (NaN on CPU), and NVML's
utilization is sampled during the timed whole-inference passes when a GPU exists.
Wall and kernel times come from separate passes (the profiler slows ops down), so
on a busy CPU a stage's kernel time can exceed its wall time.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import defaultdict
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from workbench.runtime.resources import ResourceMonitor, gpu_status
from workbench.policies.vision import VisionPolicy

POLICY_STAGES = ("Preprocessing", "Vision encoder", "State and instruction encoders",
                 "Action head", "Whole inference")
POLICY_COLUMNS = ["stage", "wall_ms", "kernel_ms", "cpu_op_ms", "cuda_ms", "gpu_busy_pct",
                  "nvml_util_pct", "kernels", "op_events", "profiled_wall_ms", "batch_size",
                  "repeats", "device", "gpu"]


class StageClock:
    """Labels stages for the profiler and, when ``timed``, records their wall seconds."""

    def __init__(self, device: Any, timed: bool = False) -> None:
        self.cuda = getattr(device, "type", str(device)) == "cuda"
        self.timed = timed
        self.walls: dict[str, list[float]] = defaultdict(list)

    def _sync(self) -> None:
        if self.timed and self.cuda:
            import torch

            torch.cuda.synchronize()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        from torch.profiler import record_function

        with record_function(name):
            self._sync()
            start = time.perf_counter()
            yield
            self._sync()
            if self.timed:
                self.walls[name].append(time.perf_counter() - start)


def staged_forward(policy: VisionPolicy, observations: Sequence[Any],
                   clock: StageClock | None = None) -> np.ndarray:
    """``policy.forward(observations)`` stage by stage; same (B, chunk, 4) result.

    >>> from workbench.contracts import LoadContext
    >>> from workbench.policies import make_policy
    >>> policy = make_policy("vision", protocol="metaworld-v1", chunk_size=2)
    >>> _ = policy.load(LoadContext("metaworld-v1"))
    >>> obs = synthetic_observations(2, image_size=32)
    >>> np.allclose(staged_forward(policy, obs), policy.forward(obs))
    True
    """
    import torch

    net, clock = policy.net, clock or StageClock(policy.device)
    with torch.inference_mode(), clock.stage("Whole inference"):
        with clock.stage("Preprocessing"):
            images, state, tokens, offsets = policy.preprocess(observations)
        with clock.stage("Vision encoder"):
            batch = images.shape[0]
            feats = net.encoder(images.flatten(0, 1)).view(batch, -1)
        with clock.stage("State and instruction encoders"):
            encoded = [net.state(state), net.words(tokens, offsets)]
        with clock.stage("Action head"):
            out = net.head(torch.cat([feats, *encoded], dim=1))
        return out.view(batch, net.chunk_size, net.action_dim).float().cpu().numpy()


def synthetic_observations(batch_size: int, image_size: int = 224,
                           cameras: Sequence[str] = ("images.primary", "images.wrist"),
                           instruction: str = "reach the goal position", state_dim: int = 4,
                           seed: int = 0) -> list[dict[str, Any]]:
    """``batch_size`` observations with random uint8 frames (H = W = ``image_size``) and a
    random ``state_dim`` state.

    Inference cost does not depend on pixel values, so no simulator is needed.

    >>> obs = synthetic_observations(3, image_size=16)
    >>> len(obs), obs[0]["images.primary"].shape, obs[0]["state"].dtype
    (3, (16, 16, 3), dtype('float32'))
    """
    rng = np.random.default_rng(seed)
    return [{**{c: rng.integers(0, 256, (image_size, image_size, 3), dtype=np.uint8)
                for c in cameras},
             "state": rng.uniform(-1, 1, state_dim).astype(np.float32),
             "instruction": instruction,
             "episode_id": f"synthetic/{i}", "step": 0} for i in range(batch_size)]


def _wall_pass(policy: VisionPolicy, observations: Sequence[Any], repeats: int,
               gpu_index: int | None) -> tuple[dict[str, float], float]:
    """Median wall ms per stage, and NVML's mean GPU utilization (NaN without a GPU)."""
    clock = StageClock(policy.device, timed=True)
    with ResourceMonitor(interval_s=0.02, gpu_index=gpu_index) as monitor:
        for _ in range(repeats):
            staged_forward(policy, observations, clock)
    walls = {name: 1e3 * float(np.median(v)) for name, v in clock.walls.items()}
    return walls, monitor.result.gpu.util_mean_pct


def _descendants(event: Any) -> Iterator[Any]:
    for child in event.cpu_children:
        yield child
        yield from _descendants(child)


def _kernel_pass(policy: VisionPolicy, observations: Sequence[Any],
                 repeats: int) -> dict[str, dict[str, float]]:
    """Per stage, per call: self CPU ms of ops, CUDA ms, op events, CUDA kernels, and the
    stage's own (inclusive) CPU ms under the profiler."""
    from torch.profiler import ProfilerActivity, profile

    cuda = StageClock(policy.device).cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(repeats):
            staged_forward(policy, observations)
    stats: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for event in prof.events():
        if event.name in POLICY_STAGES and str(event.device_type).endswith("CPU"):
            ops = [e for e in _descendants(event) if e.name not in POLICY_STAGES]
            row = stats[event.name]
            row["profiled_wall_ms"] += event.cpu_time_total / 1e3 / repeats
            row["cpu_op_ms"] += sum(e.self_cpu_time_total for e in ops) / 1e3 / repeats
            row["cuda_ms"] += event.device_time_total / 1e3 / repeats if cuda else math.nan
            row["op_events"] += len(ops) / repeats
            row["kernels"] += sum(len(e.kernels) for e in [event, *ops]) / repeats
    return stats


def profile_policy_stages(policy: VisionPolicy, observations: Sequence[Any], repeats: int = 20,
                          warmup: int = 3) -> pd.DataFrame:
    """Wall and kernel time per stage of a loaded vision policy on one batch.

    Returns one row per stage in ``POLICY_STAGES`` (columns ``POLICY_COLUMNS``):
    wall_ms (median per call), kernel_ms (mean per call: cuda_ms on GPU, else
    cpu_op_ms, the ops' self CPU time), gpu_busy_pct (cuda_ms / wall_ms, NaN on
    CPU), nvml_util_pct (NVML during the timed passes, "Whole inference" row only, NaN
    without a GPU), kernels (CUDA kernels on GPU, else op events, per call), and ``gpu``:
    "available" or "unavailable: <reason>".

    >>> from workbench.contracts import LoadContext
    >>> from workbench.policies import make_policy
    >>> policy = make_policy("vision", protocol="metaworld-v1", chunk_size=2)
    >>> _ = policy.load(LoadContext("metaworld-v1"))
    >>> df = profile_policy_stages(policy, synthetic_observations(2, 32), repeats=2, warmup=1)
    >>> df["stage"].tolist() == list(POLICY_STAGES), bool((df["wall_ms"] > 0).all())
    (True, True)
    """
    if policy.net is None:
        raise ValueError("profile_policy_stages needs a loaded VisionPolicy (call .load first)")
    if repeats < 1:
        raise ValueError(f"repeats: expected >= 1; got {repeats}")
    for _ in range(warmup):
        staged_forward(policy, observations)
    cuda = StageClock(policy.device).cuda
    gpu_index = (policy.device.index or 0) if cuda else None
    walls, nvml = _wall_pass(policy, observations, repeats, gpu_index)
    kernels = _kernel_pass(policy, observations, repeats)
    status = gpu_status(gpu_index) if cuda else f"unavailable: policy on {policy.device}"
    return pd.DataFrame([_stage_row(s, walls[s], kernels[s], cuda, nvml, len(observations),
                                    repeats, str(policy.device), status)
                         for s in POLICY_STAGES], columns=POLICY_COLUMNS)


def _stage_row(stage: str, wall_ms: float, k: dict[str, float], cuda: bool, nvml: float,
               batch: int, repeats: int, device: str, status: str) -> dict[str, Any]:
    cuda_ms = k["cuda_ms"] if cuda else math.nan
    return {"stage": stage, "wall_ms": wall_ms, "kernel_ms": cuda_ms if cuda else k["cpu_op_ms"],
            "cpu_op_ms": k["cpu_op_ms"], "cuda_ms": cuda_ms,
            "gpu_busy_pct": 100 * cuda_ms / wall_ms if cuda else math.nan,
            "nvml_util_pct": nvml if stage == "Whole inference" else math.nan,
            "kernels": k["kernels"] if cuda else k["op_events"], "op_events": k["op_events"],
            "profiled_wall_ms": k["profiled_wall_ms"], "batch_size": batch,
            "repeats": repeats, "device": device, "gpu": status}


def profile_policy_batches(policy: VisionPolicy, batch_sizes: Sequence[int],
                           image_size: int = 224, repeats: int = 20, warmup: int = 3,
                           seed: int = 0) -> pd.DataFrame:
    """:func:`profile_policy_stages` on synthetic batches of each size, stacked."""
    return pd.concat([profile_policy_stages(
        policy, synthetic_observations(b, image_size, policy.cameras,
                                       state_dim=policy.state_dim, seed=seed),
        repeats, warmup) for b in batch_sizes], ignore_index=True)


def policy_stage_table(profiles: pd.DataFrame) -> pd.DataFrame:
    """The paper's layout: (batch, stage) rows; Wall, Kernel time, GPU busy, Kernels.

    >>> df = pd.DataFrame({"stage": ["Action head"], "wall_ms": [0.6], "kernel_ms": [0.4],
    ...                    "gpu_busy_pct": [float("nan")], "kernels": [30.0], "batch_size": [1]})
    >>> policy_stage_table(df).columns.tolist()
    ['Wall (ms)', 'Kernel time (ms)', 'GPU busy (%)', 'Kernels']
    """
    names = {"wall_ms": "Wall (ms)", "kernel_ms": "Kernel time (ms)",
             "gpu_busy_pct": "GPU busy (%)", "kernels": "Kernels"}
    table = profiles.rename(columns={"batch_size": "Batch", "stage": "Stage"})
    return table.set_index(["Batch", "Stage"])[list(names)].rename(columns=names)
