"""Weights of the vision policy: the shipped ``"bc"`` file, or any ``.pt`` written here.

A weights file holds the network's state dict (float16), the chunk length, the cameras
and the protocol it was trained for, and what made it (``meta``). Training lives in
:mod:`workbench.studies.training`.

>>> weights_path("bc").name
'vision_bc.pt'
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

DATA = Path(__file__).resolve().parents[1] / "data"
SHIPPED = {"bc": DATA / "vision_bc.pt"}


def weights_path(name: str) -> Path:
    """A shipped weights name ("bc") or a path to a ``.pt`` file."""
    return SHIPPED.get(name, Path(name))


def save_weights(path: str | Path, state_dict: dict, chunk_size: int,
                 cameras: Sequence[str], protocol: str, meta: dict | None = None) -> Path:
    """Write weights with what the policy needs to rebuild the network."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {k: v.half() if v.is_floating_point() else v
                               for k, v in state_dict.items()},
                "chunk_size": chunk_size, "cameras": list(cameras), "protocol": protocol,
                "meta": meta or {}}, path)
    return path


def load_weights(name: str) -> dict:
    """Read weights written by :func:`save_weights` (float32 restored)."""
    import torch

    path = weights_path(name)
    if not path.exists():
        raise FileNotFoundError(f"no weights at {path}; shipped: {sorted(SHIPPED)}")
    blob = torch.load(path, map_location="cpu")
    if "protocol" not in blob:
        raise ValueError(f"{path} names no protocol; write it with save_weights(protocol=...)")
    blob["state_dict"] = {k: v.float() if v.is_floating_point() else v
                          for k, v in blob["state_dict"].items()}
    return blob
