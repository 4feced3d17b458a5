"""Per-step overhead of the SIM service path against the local path, on the same cases.

Two paths, one policy, the same cases, both through the runner (``workbench.run``):

- local: ``backend: sequential`` with ``observe: chunk_boundary`` and ``warm_up: true``
  (the environment and its renderers built before the clock);
- service: ``backend: service`` against a ``workbench serve`` process on loopback,
  ``observe: chunk_boundary`` (the driver fetches an observation only where the local
  loop reads one). The service's environment and renderers are built by a warm-up run
  on cases of their own before any measured run (the service starts a case only once).

Workloads: ``zero`` (zero actions, reads only ``state``: it never reaches the goal, so
every episode runs the full ``max_steps``; the table's steps/run shows it) and
``vision`` with the shipped behaviour-cloned weights (chunks of 8, both cameras), whose
episodes end at success, on the same cases in both paths. Repeats alternate the order
of the two paths (local first, then service first, ...); repeat k runs shard k of the
plan on both paths.

The clock is the runner's ``report.wall_s``: from the first episode to the last, which
leaves out the service's start-up, the environment's construction, the policy's load
and the driver's connection. steps/s = controls executed / wall_s. Overhead per step
(ms) = (1 / median service steps/s - 1 / median local steps/s) * 1000.

    python perf/service_overhead.py [--quick] [--repeats N] [--out DIR]

Default: 5 repeats (about 2 minutes on 2 cores); ``--quick``: 3 repeats of shorter runs
(about 35 s).

Prints the table and writes it to ``<out>/service_overhead.txt`` and ``.json`` (out:
``perf/results``; with ``--quick``, ``service_overhead_quick.*``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator, Sequence
from unittest import mock

import pandas as pd
import psutil

import workbench
from workbench.contracts import use_headless_rendering

RESULTS = Path(__file__).resolve().parent / "results"
SUITE = "MT1:reach-v3"


@dataclass(frozen=True)
class Workload:
    """One policy on ``episodes`` cases per repeat, each capped at ``max_steps``."""

    label: str
    policy: str
    options: dict
    episodes: int
    max_steps: int


BC = {"weights": "bc"}
WORKLOADS = {
    "default": (Workload("zero", "zero", {}, 4, 500), Workload("vision bc", "vision", BC, 4, 100)),
    "quick": (Workload("zero", "zero", {}, 2, 200), Workload("vision bc", "vision", BC, 2, 60)),
}
"""Per repeat: zero runs every episode to ``max_steps``; vision bc ends at success."""


@contextlib.contextmanager
def sim_service(episodes: int, image_size: int, max_steps: int) -> Iterator[tuple[str, str]]:
    """A ``workbench serve`` process on loopback scheduling ``episodes`` cases of
    :data:`SUITE`; yields (url, admin token) and stops it on exit."""
    state = Path(tempfile.mkdtemp(prefix="sim-service-"))  # fresh: its cases never ran
    token_file = state / "token"
    command = [sys.executable, "-m", "workbench.cli", "serve", "--benchmark", "metaworld",
               "--suite", SUITE, "--episodes", str(episodes), "--image-size", str(image_size),
               "--max-steps", str(max_steps), "--port", "0", "--state-dir", str(state),
               "--token-file", str(token_file)]
    service = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = service.stdout.readline()
        found = re.search(r"ws://\S+?(?=;)", line)
        if found is None:
            raise RuntimeError(f"SIM service did not start (exit {service.poll()}): {line!r}")
        yield found.group(0), token_file.read_text()
    finally:
        service.terminate()
        service.wait(timeout=60)
        shutil.rmtree(state, ignore_errors=True)


def source_revision() -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes), else the version."""
    from workbench.records.provenance import git_commit

    commit, dirty = git_commit(str(Path(__file__).resolve().parent))
    if commit is None:
        return f"workbench {workbench.__version__}"
    return f"commit {commit[:7]}{'+dirty' if dirty else ''}"


def measure(config: workbench.EvalConfig, path: str, repeat: int) -> dict:
    """One run of ``config``; returns its row (steps, wall_s, steps_per_s, ...)."""
    result = workbench.run(config.replace(output_dir=tempfile.mkdtemp(prefix="overhead-")))
    report, df = result.report, result.results
    if df["error_kind"].notna().any():
        raise RuntimeError(f"{path} run {repeat}: errors {df['error_message'].dropna().tolist()}")
    return {"path": path, "repeat": repeat, "episodes": len(df), "steps": report.steps,
            "successes": report.successes, "policy_calls": report.policy_calls,
            "wall_s": report.wall_s, "steps_per_s": report.steps_per_s,
            "setup_s": report.setup_s}


def compare(workload: Workload, repeats: int, image_size: int) -> list[dict]:
    """Interleaved local and service runs of ``workload``: repeat k (1..repeats) runs
    shard k on both paths, alternating which goes first; shard 0 warms the service."""
    shards = repeats + 1
    base = workbench.load_config(dict(
        benchmark="metaworld", suite=SUITE, episodes=workload.episodes * shards,
        shards=shards, policy=workload.policy, policy_options=workload.options,
        image_size=image_size, max_steps=workload.max_steps, observe="chunk_boundary",
        progress=False, output_dir=tempfile.mkdtemp(prefix="overhead-")))
    local = base.replace(backend="sequential", warm_up=True)
    with sim_service(workload.episodes * shards, image_size, workload.max_steps) as (url, token), \
            mock.patch.dict(os.environ, {base.service.token_env: token}):
        service = base.replace(backend="service", service={"url": url})
        measure(service.replace(shard=0), "warm-up", 0)
        rows = []
        for k in range(1, shards):
            order = [("local", local), ("service", service)]
            for path, config in order if k % 2 else order[::-1]:
                rows.append(measure(config.replace(shard=k), path, k))
    return [{"workload": workload.label, **row} for row in rows]


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Per workload and path: runs, steps per run, median, min and max steps/s; then
    per workload the ratio of medians (service / local) and the overhead per step (ms)."""
    table = (runs.groupby(["workload", "path"], sort=False)
             .agg(runs=("steps_per_s", "size"), steps_per_run=("steps", "median"),
                  median_sps=("steps_per_s", "median"), min_sps=("steps_per_s", "min"),
                  max_sps=("steps_per_s", "max"))
             .reset_index())
    medians = table.pivot(index="workload", columns="path", values="median_sps")
    ratio = medians["service"] / medians["local"]
    overhead = (1 / medians["service"] - 1 / medians["local"]) * 1000
    service = table["path"] == "service"
    table["ratio_service_to_local"] = table["workload"].map(ratio).where(service)
    table["overhead_ms_per_step"] = table["workload"].map(overhead).where(service)
    return table


def same_outcomes(runs: pd.DataFrame) -> bool:
    """Whether each repeat's local and service runs executed the same steps and successes."""
    paired = runs.pivot_table(index=["workload", "repeat"], columns="path",
                              values=["steps", "successes"])
    return bool((paired["steps"]["local"] == paired["steps"]["service"]).all()
                and (paired["successes"]["local"] == paired["successes"]["service"]).all())


def format_table(table: pd.DataFrame, header: Sequence[str]) -> str:
    """The header lines, then the table with every number to 3 decimals."""
    shown = table.rename(columns={"median_sps": "median steps/s", "min_sps": "min",
                                  "max_sps": "max", "steps_per_run": "steps/run",
                                  "ratio_service_to_local": "ratio of medians",
                                  "overhead_ms_per_step": "overhead ms/step"})
    body = shown.to_string(index=False, na_rep="", formatters={"steps/run": "{:g}".format},
                           float_format="{:.3f}".format)
    return "\n".join([*header, "", body])


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter episodes (< 2 min)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per path and workload (5; --quick: 3)")
    parser.add_argument("--episodes", type=int, default=None, help="cases per run (override)")
    parser.add_argument("--max-steps", type=int, default=None, help="step cap (override)")
    parser.add_argument("--workloads", nargs="*", default=None, help="zero, 'vision bc'")
    parser.add_argument("--image-size", type=int, default=64, help="camera resolution")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the result files")
    args = parser.parse_args(argv)
    use_headless_rendering()
    args.repeats = args.repeats or (3 if args.quick else 5)
    workloads = [replace(w, episodes=args.episodes or w.episodes,
                         max_steps=args.max_steps or w.max_steps)
                 for w in WORKLOADS["quick" if args.quick else "default"]
                 if args.workloads is None or w.label in args.workloads]
    start = time.perf_counter()
    runs = pd.DataFrame([row for w in workloads
                         for row in compare(w, args.repeats, args.image_size)])
    table = summarize(runs)
    agree = same_outcomes(runs)
    header = [
        f"service_overhead.py{' --quick' if args.quick else ''}: {SUITE}, image "
        f"{args.image_size}px, {args.repeats} interleaved repeats per path, observe "
        "chunk_boundary on both paths",
        "clock: report.wall_s (first episode to last; service start-up, environment build, policy "
        "load and connection excluded; the service warmed by a run on cases of its own)",
        "workloads: " + "; ".join(f"{w.label}: {w.episodes} cases x <= {w.max_steps} steps per run"
                                  for w in workloads),
        f"{source_revision()}; machine: {psutil.cpu_count()} cores, {platform.machine()}, Python "
        f"{platform.python_version()}, LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS', 'unset')}; "
        f"same steps and successes on both paths: {agree}; "
        f"total {time.perf_counter() - start:.0f} s",
    ]
    text = format_table(table, header)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "service_overhead_quick" if args.quick else "service_overhead"
    (out / f"{stem}.txt").write_text(text + "\n")
    payload = {"header": header, "workloads": [asdict(w) for w in workloads],
               "image_size": args.image_size, "repeats": args.repeats,
               "same_outcomes": agree, "summary": json.loads(table.to_json(orient="records")),
               "runs": json.loads(runs.to_json(orient="records"))}
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=1))
    return payload


if __name__ == "__main__":
    main()
