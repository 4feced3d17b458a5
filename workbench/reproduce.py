"""Run the reproduction notebooks through papermill, in batch.

Each notebook runs with its working directory set to ``notebooks/`` and its
``figures_dir`` parameter pointed at ``figures``. Parameters come from the
notebook's own defaults, or with ``quick`` from ``experiments/tiny/<name>.yaml``
(the same tiny parameters the test suite uses), or from an explicit mapping.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]


def notebook_paths(names: Sequence[str] | None = None) -> list[Path]:
    """The project's notebooks (sorted), or just the named ones."""
    found = sorted((REPO / "notebooks").glob("*.ipynb"))
    if names:
        wanted = {Path(n).name for n in names}
        missing = wanted - {p.name for p in found}
        if missing:
            raise ValueError(f"unknown notebooks {sorted(missing)}; available: "
                             f"{[p.name for p in found]}")
        found = [p for p in found if p.name in wanted]
    return found


def notebook_parameters(path: Path, tier: str) -> dict[str, Any]:
    """Parameters of a tier: "default" (none), "tiny" or "full" (``experiments/``)."""
    folder = {"default": None, "tiny": REPO / "experiments" / "tiny", "full": REPO / "experiments"}
    if tier not in folder:
        raise ValueError(f"unknown tier {tier!r}; available: {sorted(folder)}")
    if folder[tier] is None:
        return {}
    file = folder[tier] / f"{path.stem}.yaml"
    return yaml.safe_load(file.read_text()) or {} if file.exists() else {}


def run_notebook(path: Path, output: Path, parameters: dict[str, Any],
                 figures: str | Path) -> float:
    """Execute one notebook with papermill; returns seconds taken."""
    import papermill

    output.parent.mkdir(parents=True, exist_ok=True)
    params = {"figures_dir": str(Path(figures).resolve()), **parameters}
    start = time.perf_counter()
    papermill.execute_notebook(str(path), str(output), parameters=params,
                               cwd=str(path.parent), kernel_name="python3", progress_bar=False)
    return time.perf_counter() - start


def reproduce(quick: bool = False, notebooks: Sequence[str] | None = None,
              figures: str | Path = "figures", out: str | Path = "out/notebooks",
              tier: str | None = None) -> pd.DataFrame:
    """Run every notebook (or the named ones); returns a table of status and seconds."""
    tier = tier or ("tiny" if quick else "default")
    rows = []
    for path in notebook_paths(notebooks):
        params = notebook_parameters(path, tier)
        try:
            seconds = run_notebook(path, Path(out) / path.name, params, figures)
            rows.append({"notebook": path.name, "status": "ok", "seconds": round(seconds, 1)})
        except Exception as exc:  # keep going: one failing notebook must not hide the rest
            rows.append({"notebook": path.name, "status": f"failed: {type(exc).__name__}",
                         "seconds": float("nan")})
    return pd.DataFrame(rows, columns=["notebook", "status", "seconds"])
