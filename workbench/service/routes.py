"""What ``workbench serve`` (and every backend) can run here: each benchmark family,
its protocol, suites, and its status on this machine.

A family is a registered benchmark adapter. Its status is the adapter's own
``readiness()``: ``ready``, or what is missing (a package, assets, a device), checked
without importing the simulator. Protocols of the source papers that no adapter
implements are listed too. :func:`routes_markdown` is the support matrix of
docs/evaluate.md (a test keeps the two equal).

>>> table = routes()
>>> table.loc[table["family"] == "metaworld", ["protocol", "status"]].values.tolist()
[['metaworld-v1', 'runnable']]
"""

from __future__ import annotations

import re

import pandas as pd

from workbench.benchmarks import BENCHMARKS, benchmark_class
from workbench.contracts.protocols import PROTOCOLS


def status_of(readiness: str) -> str:
    """The readiness text's kinds: ``runnable``, or what is missing among ``missing
    package``, ``missing assets`` and ``needs a GPU``.

    >>> status_of("missing package sapien (pip install ...); missing device: no CUDA GPU")
    'missing package, needs a GPU'
    """
    if readiness == "ready":
        return "runnable"
    kinds = []
    for reason in re.split(r"; (?=missing |no )", readiness):
        kind = ("missing package" if reason.startswith("missing package") else
                "needs a GPU" if reason.startswith("missing device") else "missing assets")
        if kind not in kinds:
            kinds.append(kind)
    return ", ".join(kinds)


def _suites(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def routes() -> pd.DataFrame:
    """One row per family: family, benchmark, protocol, suites, status (its kind),
    detail (the adapter's readiness text), adapter."""
    rows, served = [], set()
    for name in BENCHMARKS.names():
        try:
            cls = benchmark_class(name)
        except (ValueError, ImportError) as exc:
            rows.append({"family": name, "benchmark": "?", "protocol": "?", "suites": "?",
                         "status": "adapter does not load", "detail": str(exc)[:200],
                         "adapter": "?"})
            continue
        served.add(cls.protocol.name)
        rows.append({"family": name, "benchmark": cls.protocol.benchmark,
                     "protocol": cls.protocol.name, "suites": _suites(cls.list_suites()),
                     "status": status_of(cls.readiness()), "detail": cls.readiness(),
                     "adapter": f"{cls.__module__}:{cls.__qualname__}"})
    for protocol in sorted(set(PROTOCOLS) - served):
        rows.append({"family": "-", "benchmark": PROTOCOLS[protocol].benchmark,
                     "protocol": protocol, "suites": "-",
                     "status": "no adapter", "detail": "protocol declared only",
                     "adapter": "-"})
    return pd.DataFrame(rows)


def routes_markdown(table: pd.DataFrame | None = None) -> str:
    """The support matrix as a Markdown table (family, protocol, suites, status)."""
    table = routes() if table is None else table
    lines = ["| family | protocol | suites | status here |", "|---|---|---|---|"]
    lines += [f"| `{r.family}` | `{r.protocol}` | {r.suites} | {r.status} |"
              for r in table.itertuples()]
    lines += ["", "What is missing where a family does not run here (`workbench benchmarks` "
                  "prints the full text):", ""]
    lines += [f"- `{r.family}`: {r.detail.split(' (')[0].split(';')[0]}"
              for r in table.itertuples() if r.status not in ("runnable", "no adapter")]
    return "\n".join(lines)
