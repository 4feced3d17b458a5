"""Save a figure with the numbers and config that made it, side by side.

>>> import matplotlib; matplotlib.use("Agg")
>>> import matplotlib.pyplot as plt, pandas as pd, tempfile
>>> fig, ax = plt.subplots()
>>> paths = save_figure(fig, "demo", data=pd.DataFrame({"x": [1]}), config={"a": 1},
...                     directory=tempfile.mkdtemp())
>>> sorted(p.suffix for p in paths)
['.csv', '.json', '.png']
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

import pandas as pd


def figures_dir(directory: str | os.PathLike | None = None) -> Path:
    """The figures folder: ``directory``, else ``$WORKBENCH_FIGURES``, else ``./figures``."""
    path = Path(directory or os.environ.get("WORKBENCH_FIGURES", "figures"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_figure(fig: Any, name: str, data: pd.DataFrame | Mapping[str, Any] | None = None,
                config: Mapping[str, Any] | None = None,
                directory: str | os.PathLike | None = None) -> list[Path]:
    """Write ``name.png`` and beside it ``name.csv`` (a DataFrame) or ``name.json``.

    The JSON always holds ``config`` (the parameters that made the figure) and, when
    ``data`` is a mapping, the numbers themselves. Returns the paths written.
    """
    out = figures_dir(directory)
    paths = [out / f"{name}.png"]
    fig.savefig(paths[0], dpi=110, bbox_inches="tight")
    payload: dict[str, Any] = {"figure": paths[0].name, "config": dict(config or {})}
    if isinstance(data, pd.DataFrame):
        paths.append(out / f"{name}.csv")
        data.to_csv(paths[-1], index=False)
        payload["data"] = paths[-1].name
    elif data is not None:
        payload["data"] = dict(data)
    paths.append(out / f"{name}.json")
    paths[-1].write_text(json.dumps(payload, indent=2, default=_jsonable))
    return paths


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
