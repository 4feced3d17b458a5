"""Run the reproduction notebooks through papermill, in batch.

Where the notebooks are: ``$WORKBENCH_HOME`` when set (a folder holding ``notebooks/``
and ``experiments/``), else the source checkout this package runs from, else
``<prefix>/share/robo-workbench/`` where an installed wheel puts them
(``[tool.setuptools.data-files]``).

Each notebook runs with its working directory set to the folder of executed notebooks
(``out``), so its relative output folders land beside them, and its ``figures_dir``
parameter pointed at ``figures``. Parameters come from the notebook's own defaults, or
with ``quick`` from ``experiments/tiny/<name>.yaml`` (the same tiny parameters the test
suite uses), or ``experiments/<name>.yaml`` for the full scale.

What the notebooks' processes print (kernel warnings, simulator messages) goes to one
log file per notebook beside the executed notebooks, not to the terminal; the cells'
own outputs stay in the executed notebooks. The terminal shows one progress bar.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd
import yaml

from workbench.errors import WorkbenchError

SOURCE = Path(__file__).resolve().parents[1]
INSTALLED = Path(sys.prefix) / "share" / "robo-workbench"


def resource_root() -> Path:
    """The folder holding ``notebooks/`` and ``experiments/`` (see the module docstring)."""
    candidates = [Path(os.environ["WORKBENCH_HOME"])] if os.environ.get("WORKBENCH_HOME") else []
    candidates += [SOURCE, INSTALLED]
    for root in candidates:
        if (root / "notebooks").is_dir() and (root / "experiments").is_dir():
            return root
    raise FileNotFoundError(f"no notebooks/ and experiments/ in any of "
                            f"{[str(c) for c in candidates]}; set WORKBENCH_HOME to a checkout")


def notebook_paths(names: Sequence[str] | None = None) -> list[Path]:
    """The project's notebooks (sorted), or just the named ones."""
    found = sorted((resource_root() / "notebooks").glob("*.ipynb"))
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
    experiments = resource_root() / "experiments"
    folder = {"default": None, "tiny": experiments / "tiny", "full": experiments}
    if tier not in folder:
        raise ValueError(f"unknown tier {tier!r}; available: {sorted(folder)}")
    if folder[tier] is None:
        return {}
    file = folder[tier] / f"{path.stem}.yaml"
    return yaml.safe_load(file.read_text()) or {} if file.exists() else {}


class NotebookFailed(WorkbenchError, RuntimeError):
    """A notebook's cell raised; the message names the cell and the error."""


def _failure(exc: BaseException) -> str:
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    if ename:
        cell = getattr(exc, "exec_count", None)
        return f"cell {cell}: {ename}: {evalue}" if cell is not None else f"{ename}: {evalue}"
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _quiet(log: Path) -> Iterator[None]:
    """Send file descriptors 1 and 2 (this process's and its children's: the kernel's)
    and Python warnings and log records to ``log`` while the block runs."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush(), sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    loggers = [logging.getLogger(n) for n in ("papermill", "traitlets", "jupyter_client",
                                              "nbclient", "asyncio")]
    levels = [lg.level for lg in loggers]
    with open(log, "a") as sink, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        for lg in loggers:
            lg.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def run_notebook(path: Path, output: Path, parameters: dict[str, Any],
                 figures: str | Path, log: Path | None = None) -> float:
    """Execute one notebook with papermill in ``output``'s folder; returns seconds taken.

    Raises :class:`NotebookFailed` naming the failing cell and its error.
    """
    import papermill

    output.parent.mkdir(parents=True, exist_ok=True)
    params = {"figures_dir": str(Path(figures).resolve()), **parameters}
    start = time.perf_counter()
    quiet = _quiet(log) if log is not None else contextlib.nullcontext()
    try:
        with quiet:
            papermill.execute_notebook(str(path), str(output), parameters=params,
                                       cwd=str(output.parent.resolve()), kernel_name="python3",
                                       progress_bar=False)
    except Exception as exc:
        raise NotebookFailed(_failure(exc)) from exc
    return time.perf_counter() - start


def reproduce(quick: bool = False, notebooks: Sequence[str] | None = None,
              figures: str | Path = "figures", out: str | Path = "out/notebooks",
              tier: str | None = None, progress: bool = True) -> pd.DataFrame:
    """Run every notebook (or the named ones); one progress bar on the terminal.

    Returns one row per notebook: notebook, status ("ok" or "failed: cell N: Error:
    message"), seconds, figures (files it wrote to ``figures``), log (its processes'
    output) and executed (the executed notebook).
    """
    from tqdm.auto import tqdm

    tier = tier or ("tiny" if quick else "default")
    paths, out, figures = notebook_paths(notebooks), Path(out), Path(figures)
    figures.mkdir(parents=True, exist_ok=True)
    terminal = os.fdopen(os.dup(2), "w")
    rows = []
    bar = tqdm(paths, desc="notebooks", unit="nb", file=terminal, disable=not progress)
    for path in bar:
        bar.set_postfix_str(path.stem)
        started = time.time()
        log, executed = out / f"{path.stem}.log", out / path.name
        try:
            seconds = run_notebook(path, executed, notebook_parameters(path, tier), figures, log)
            status = "ok"
        except NotebookFailed as exc:  # keep going: one failing notebook must not hide the rest
            seconds, status = float("nan"), f"failed: {exc}"
        written = sum(p.stat().st_mtime >= started for p in figures.glob("*"))
        rows.append({"notebook": path.name, "status": status, "seconds": seconds,
                     "figures": written, "log": str(log), "executed": str(executed)})
        bar.write(f"{path.stem}: {status}", file=terminal)
    bar.close()
    terminal.close()
    return pd.DataFrame(rows, columns=["notebook", "status", "seconds", "figures", "log",
                                       "executed"])
