"""Chaos: a 12-case campaign whose processes are SIGKILLed at seeded random moments.

Each trial freezes a fresh campaign (MetaWorld MT10, three tasks x four cases, the
shipped behaviour-cloned ``vision`` policy, 32 px cameras) and runs ``workbench campaign
run`` in a process of its own. Once ``k`` cases are done (k drawn from 1..10) and a drawn
delay (0..1 s) later, one process gets SIGKILL, in turn:

- ``driver``: the ``campaign run`` process itself (pool backend);
- ``worker``: one simulator worker of its pool (drawn of two);
- ``replica``: the pool's policy replica;
- ``sim-service``: the ``workbench serve`` process of a ``backend: service`` campaign
  (restarted on the same ``--state-dir`` before the resume);
- ``policy-server``: the ``workbench serve-policy`` process of a ``policy: remote``
  campaign (restarted on the same port before the resume).

The campaign is then resumed with a plain ``campaign run`` (no retry) and checked:
finished cases lost (a case finished before the resume that is missing or changed
after it), cases attempted twice (in the records, and by the SIM service's own count),
cases neither finished nor recorded as interrupted, and outcome mismatches against an
undisturbed campaign of the same route on the cases both finished without error.
A script, not a timed test: ``python perf/chaos.py`` (about 15 minutes on two
cores), results in ``perf/results/chaos.txt``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import psutil

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("driver", "worker", "replica", "sim-service", "policy-server")
ROUTE = {"driver": "pool", "worker": "pool", "replica": "pool", "sim-service": "service",
         "policy-server": "remote"}
SUITE, TASKS, EPISODES = "MT10", ["reach-v3", "push-v3", "window-open-v3"], 4
MAX_STEPS, IMAGE_SIZE = 60, 32
POLICY, OPTIONS = "vision", {"weights": "bc"}
OUTCOME = ["success", "terminal_step", "steps", "termination", "policy_calls"]
TOKEN = "chaos-operator-token-0123456789"
CLI = [sys.executable, "-m", "workbench.cli"]


def base_config(route: str, folder: Path, service_url: str | None,
                policy_url: str | None) -> dict[str, Any]:
    config = {"benchmark": "metaworld", "suite": SUITE, "tasks": TASKS, "episodes": EPISODES,
              "max_steps": MAX_STEPS, "image_size": IMAGE_SIZE, "policy": POLICY,
              "policy_options": OPTIONS, "progress": False, "video": "off",
              "interactions": False, "output_dir": str(folder)}
    if route == "pool":
        config |= {"backend": "pool", "pool": {"workers": 2, "replicas": 1}}
    elif route == "service":
        config |= {"backend": "service", "service": {"url": service_url}}
    else:
        config |= {"backend": "sequential", "policy": "remote",
                   "policy_options": {"url": policy_url, "timeout_s": 30}}
    return config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_line(proc: subprocess.Popen, pattern: str) -> str:
    line = proc.stdout.readline()
    found = re.search(pattern, line)
    if found is None:
        raise RuntimeError(f"{proc.args[3]} did not start: {line!r} {proc.stderr.read()}")
    return found.group(1)


class Services:
    """The route's servers, restartable after a SIGKILL (same state folder, same port)."""

    def __init__(self, route: str, work: Path) -> None:
        self.route, self.work = route, work
        self.state, self.port = work / "sim-state", free_port()
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None

    def start(self) -> None:
        env = os.environ | {"WORKBENCH_SIM_TOKEN": TOKEN}
        if self.route == "service":
            self.proc = subprocess.Popen(
                [*CLI, "serve", "--benchmark", "metaworld", "--suite", SUITE, "--tasks", *TASKS,
                 "--episodes", str(EPISODES), "--image-size", str(IMAGE_SIZE), "--max-steps",
                 str(MAX_STEPS), "--port", "0", "--state-dir", str(self.state)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            self.url = first_line(self.proc, r"at (ws://\S+);")
        elif self.route == "remote":
            options = [f"--set={k}={v}" for k, v in OPTIONS.items()]
            self.proc = subprocess.Popen(
                [*CLI, "serve-policy", POLICY, *options, "--protocol", "metaworld-v1",
                 "--port", str(self.port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, env=env)
            self.url = first_line(self.proc, r"at (ws://\S+)")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def service_attempts(self) -> dict[str, int]:
        """The SIM service's own attempt count per case (empty for other routes)."""
        if self.route != "service":
            return {}
        from workbench.service.sim_client import SimClient

        admin = SimClient(self.url, TOKEN, timeout_s=30)
        try:
            return {c["case"]: c["attempts"] for c in admin.request("status")["cases"]}
        finally:
            admin.close()


@contextmanager
def services(route: str, work: Path) -> Iterator[Services]:
    running = Services(route, work)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def campaign_run(folder: Path, svc: Services, log: Path) -> subprocess.Popen:
    sets = ["--set", f"service.url={svc.url}"] if svc.route == "service" else []
    env = os.environ | {"WORKBENCH_SIM_TOKEN": TOKEN}
    return subprocess.Popen([*CLI, "campaign", "run", str(folder), *sets], env=env,
                            stdout=log.open("a"), stderr=subprocess.STDOUT)


def done_count(campaign: Any) -> int:
    try:
        return int(campaign.status().set_index("task").loc["ALL", "done"])
    except Exception:  # the records are being created, or busy for a moment
        return 0


def pool_children(driver: subprocess.Popen, replicas: int = 1) -> tuple[list[int], list[int]]:
    """(worker pids, replica pids) of the driver's pool: the children of its forkserver,
    in the order they were forked; the pool forks its replicas first
    (:meth:`workbench.runtime.pool.EvalPool.start`)."""
    forked = []
    try:
        children = psutil.Process(driver.pid).children(recursive=True)
    except psutil.Error:  # the run already ended
        return [], []
    for child in children:
        try:
            parent = psutil.Process(child.ppid())
            if "forkserver" in " ".join(parent.cmdline()):
                forked.append((child.create_time(), child.pid))
        except psutil.Error:
            continue
    pids = [pid for _, pid in sorted(forked)]
    return pids[replicas:], pids[:replicas]


def reference(route: str, work: Path) -> pd.DataFrame:
    """An undisturbed campaign of ``route``: its results by case."""
    from workbench.campaigns import create_campaign

    folder = work / f"reference-{route}"
    with services(route, work / f"reference-{route}-svc") as svc:
        campaign = create_campaign(base_config(route, folder, svc.url, svc.url))
        proc = campaign_run(folder, svc, work / f"reference-{route}.log")
        if proc.wait(900) != 0:
            raise RuntimeError(f"the undisturbed {route} campaign failed; see its log")
    return campaign.results().set_index("episode_id")


def trial(index: int, target: str, seed: int, work: Path,
          references: dict[str, pd.DataFrame]) -> dict[str, Any]:
    from workbench.campaigns import create_campaign

    rng = random.Random(seed * 1000 + index)
    k, delay = rng.randint(1, 10), rng.uniform(0.0, 1.0)
    route = ROUTE[target]
    folder, log = work / f"trial-{index:02d}-{target}", work / f"trial-{index:02d}.log"
    start = time.monotonic()
    row: dict[str, Any] = {"trial": index, "target": target, "k": k, "delay_s": round(delay, 2)}
    with services(route, work / f"trial-{index:02d}-svc") as svc:
        campaign = create_campaign(base_config(route, folder, svc.url, svc.url))
        driver = campaign_run(folder, svc, log)
        while done_count(campaign) < k and driver.poll() is None:
            time.sleep(0.05)
        time.sleep(delay)
        victim = None
        if driver.poll() is not None:  # it finished before the moment came
            victim = None
        elif target == "driver":
            victim = driver.pid
        elif target in ("worker", "replica"):
            workers, replicas = pool_children(driver)
            pick = workers if target == "worker" else replicas
            victim = rng.choice(pick) if pick else None
        else:
            victim = svc.proc.pid
        row["done_at_kill"] = done_count(campaign)
        row["killed"] = False
        if victim is not None and psutil.pid_exists(victim):
            os.kill(victim, signal.SIGKILL)
            row["killed"] = True
        row["disturbed_rc"] = driver.wait(900)
        before = campaign.results()
        finished = before[before["status"] == "finished"].set_index("episode_id")
        row["finished_before_resume"] = len(finished)
        if target in ("sim-service", "policy-server"):
            svc.proc.wait(30)
            svc.start()  # the same state folder / the same port
        resumed = campaign_run(folder, svc, log)
        row["resume_rc"] = resumed.wait(900)
        final = campaign.results().set_index("episode_id")
        attempts = campaign.attempts()
        served = svc.service_attempts()
    ref = references[route]
    lost = [c for c in finished.index
            if final.loc[c, "status"] != "finished"
            or not final.loc[c, OUTCOME + ["error_kind"]].equals(finished.loc[c, OUTCOME +
                                                                              ["error_kind"]])]
    per_case = attempts.groupby("episode_id").size()
    interrupted = set(attempts.loc[attempts["outcome"] == "interrupted", "episode_id"])
    unrecorded = [c for c in final.index
                  if final.loc[c, "status"] != "finished" and c not in interrupted]
    clean = [c for c in final.index if final.loc[c, "status"] == "finished"
             and pd.isna(final.loc[c, "error_kind"]) and pd.isna(ref.loc[c, "error_kind"])]
    mismatched = [c for c in clean
                  if not final.loc[c, OUTCOME].equals(ref.loc[c, OUTCOME])]
    row |= {"interrupted": len(interrupted),
            "infra_errors": int((final["error_kind"] == "infrastructure").sum()),
            "lost": len(lost), "twice": int((per_case > 1).sum())
            + sum(n > 1 for n in served.values()),
            "unrecorded": len(unrecorded), "compared": len(clean),
            "mismatched": len(mismatched), "wall_s": round(time.monotonic() - start, 1)}
    if lost or mismatched or unrecorded:
        row["detail"] = f"lost {lost[:2]} unrecorded {unrecorded[:2]} mismatched {mismatched[:2]}"
    return row


def revision() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "perf" / "results" / "chaos.txt"))
    args = parser.parse_args()
    from workbench.contracts.rendering import use_headless_rendering

    use_headless_rendering()
    work = Path(tempfile.mkdtemp(prefix="chaos-"))
    started = time.monotonic()
    references = {route: reference(route, work) for route in sorted(set(ROUTE.values()))}
    agree = all(references[r][OUTCOME].equals(references["pool"][OUTCOME])
                for r in references)
    rows = []
    for index in range(args.trials):
        rows.append(trial(index, TARGETS[index % len(TARGETS)], args.seed, work, references))
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    totals = table[["lost", "twice", "unrecorded", "mismatched"]].sum()
    lines = [
        f"perf/chaos.py --trials {args.trials} --seed {args.seed}; commit {revision()}; "
        f"{platform.node()} ({os.cpu_count()} cores); {time.strftime('%Y-%m-%d %H:%M')}; "
        f"{(time.monotonic() - started) / 60:.1f} min",
        f"campaign: metaworld {SUITE} {TASKS} x {EPISODES} = {len(TASKS) * EPISODES} cases, "
        f"policy {POLICY} {OPTIONS}, {IMAGE_SIZE} px, max_steps {MAX_STEPS}",
        f"undisturbed references (pool, service, remote) agree with each other: {agree}; "
        f"successes per route: " + ", ".join(f"{r} {int(df['success'].sum())}"
                                             for r, df in references.items()),
        "", table.to_string(index=False), "",
        f"totals over {len(table)} trials ({int(table['killed'].sum())} kills landed): "
        f"finished cases lost {totals['lost']}, cases attempted twice {totals['twice']}, "
        f"interrupted cases not recorded {totals['unrecorded']}, outcome mismatches "
        f"{totals['mismatched']} of {int(table['compared'].sum())} compared",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
