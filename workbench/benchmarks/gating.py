"""What the gated adapters share: finding what a simulator lacks here, refusing with it,
and fitting the benchmark's camera frames to the run's square ``image_size``.

An adapter whose simulator cannot run everywhere (RoboTwin 2, RoboCasa GR-1, CALVIN,
Isaac Lab) lists what is missing (packages, asset paths, a device) with cheap probes
that import nothing heavy: :func:`missing_packages` looks modules up without
importing them, :func:`gpu_names` asks NVML. ``readiness()`` joins the list, and
``reset`` raises :class:`SimulatorUnavailable` with the same text.

>>> missing_packages({"json": "stdlib", "no_such_module_here": "pip install it"})
['missing package no_such_module_here (pip install it)']
>>> has_rt_cores("NVIDIA GeForce RTX 4090"), has_rt_cores("NVIDIA H100 80GB HBM3")
(True, False)
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any, Mapping, Sequence

import numpy as np

from workbench.errors import ConfigError


class SimulatorUnavailable(ConfigError):
    """The simulator, its assets or its device are not available here; the message says
    which, and how to provide them."""


def missing_packages(modules: Mapping[str, str]) -> list[str]:
    """One reason per top-level module in ``modules`` (name -> how to install it) that
    cannot be found here. Looks modules up without importing them."""
    return [f"missing package {name} ({hint})" for name, hint in modules.items()
            if importlib.util.find_spec(name) is None]


def readiness_text(reasons: Sequence[str]) -> str:
    """``"ready"`` when nothing is missing, else the reasons joined by ``"; "``."""
    return "; ".join(reasons) if reasons else "ready"


def refuse(benchmark: str, reasons: Sequence[str]) -> None:
    """Raise :class:`SimulatorUnavailable` naming everything missing (no-op when none)."""
    if reasons:
        raise SimulatorUnavailable(f"{benchmark} cannot run here: {'; '.join(reasons)}")


def gpu_names() -> list[str]:
    """Names of the NVIDIA GPUs NVML sees (``[]`` without pynvml, a driver or a GPU).
    ``CUDA_VISIBLE_DEVICES`` is not applied: this answers what the machine has."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no module, no driver: no GPU as far as a simulator is concerned
        return []
    try:
        names = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return names
    except Exception:
        return []
    finally:
        pynvml.nvmlShutdown()


# Data-centre GPUs that have RT cores although their names lack "RTX" (NVIDIA's Isaac
# Sim requirements list the L-series and the Ampere A10/A40/A16/A2; A100, H100 and H200
# have no RT cores and are not supported for rendering).
_RT_DATACENTRE = re.compile(r"\b(L4|L20|L40S?|A10G?|A16|A2|A40|RTX)\b", re.IGNORECASE)


def has_rt_cores(gpu_name: str) -> bool:
    """Whether a GPU of this name has the RT cores Isaac Sim's renderer needs."""
    return bool(_RT_DATACENTRE.search(gpu_name))


def pad_square(frame: np.ndarray) -> np.ndarray:
    """``frame`` (H, W, C) centred in a zero square of side max(H, W), as GR00T's
    RoboCasa client letterboxes its 1280x800 egoview.

    >>> pad_square(np.ones((2, 4, 3), np.uint8))[:, :, 0].tolist()
    [[0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]]
    """
    h, w = frame.shape[:2]
    side = max(h, w)
    top, left = (side - h) // 2, (side - w) // 2
    out = np.zeros((side, side) + frame.shape[2:], frame.dtype)
    out[top:top + h, left:left + w] = frame
    return out


def square_frame(frame: np.ndarray, size: int) -> np.ndarray:
    """``frame`` letterboxed to a square (:func:`pad_square`) and resized to
    ``(size, size)`` with OpenCV's bilinear filter (OpenCV comes with each of these
    simulators; it is imported only when a resize is needed)."""
    square = pad_square(np.ascontiguousarray(frame))
    if square.shape[0] == size:
        return square
    import cv2

    return np.ascontiguousarray(cv2.resize(square, (size, size), interpolation=cv2.INTER_LINEAR))


def as_numpy(value: Any) -> np.ndarray:
    """A torch tensor (any device) or array-like as a numpy array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)
