"""Ray across two hosts on one machine: a head node and a worker node in two network
namespaces joined by a veth pair (made here, removed on leaving), each with a Ray node of
its own, a temp dir and an auth token of their own (so no other Ray on this machine joins
by accident).

Needs root (``CAP_SYS_ADMIN``) and iproute2's ``ip netns``; where they are missing,
:func:`two_hosts` raises :class:`HostsUnavailable` with the reason. The addresses are the
namespaces' own (``10.231.7.1`` and ``.2``), reachable from nowhere else. Drivers run in
the head's namespace (:meth:`TwoHosts.command`); :meth:`TwoHosts.kill` is a host losing
power (every process of its namespace SIGKILLed). tests/runtime/test_ray_cluster.py and
the scaling notebook use it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd
import yaml

NAMESPACES = ("wb-ray-head", "wb-ray-node")
ADDRESSES = ("10.231.7.1", "10.231.7.2")  # the namespaces' own addresses, nowhere else
PORT = 6391


class HostsUnavailable(RuntimeError):
    """The two namespaces cannot be made on this machine (the message says why)."""


def _sh(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=check)


def in_namespace(index: int, *command: str) -> list[str]:
    """``command`` run in host ``index``'s namespace (0: the head, 1: the worker node)."""
    return ["ip", "netns", "exec", NAMESPACES[index], *command]


def kill_namespace(index: int) -> int:
    """SIGKILL every process of host ``index``'s namespace; how many there were."""
    pids = _sh("ip", "netns", "pids", NAMESPACES[index], check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    return len(pids)


def remove_namespaces() -> None:
    for index, name in enumerate(NAMESPACES):
        kill_namespace(index)
        _sh("ip", "netns", "del", name, check=False)


def make_namespaces() -> str | None:
    """The two namespaces joined by a veth pair, or why they cannot be made here."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    remove_namespaces()  # what a killed earlier session left
    steps = [("ip", "netns", "add", NAMESPACES[0]), ("ip", "netns", "add", NAMESPACES[1]),
             ("ip", "link", "add", "wbray0", "type", "veth", "peer", "name", "wbray1")]
    for index in (0, 1):
        steps += [("ip", "link", "set", f"wbray{index}", "netns", NAMESPACES[index]),
                  tuple(in_namespace(index, "ip", "addr", "add", f"{ADDRESSES[index]}/24",
                                     "dev", f"wbray{index}")),
                  tuple(in_namespace(index, "ip", "link", "set", f"wbray{index}", "up")),
                  tuple(in_namespace(index, "ip", "link", "set", "lo", "up"))]
    for step in steps:
        done = _sh(*step, check=False)
        if done.returncode:
            remove_namespaces()
            return f"`{' '.join(step)}` failed: {done.stderr.strip()[:200]}"
    return None


@dataclass(frozen=True)
class TwoHosts:
    """A running two-node cluster: the environment its drivers need (token, paths) and
    the head's address."""

    env: dict[str, str]
    address: str = f"{ADDRESSES[0]}:{PORT}"

    def command(self, *command: str) -> list[str]:
        """``command`` run in the head's namespace (a driver of this cluster)."""
        return in_namespace(0, *command)

    def eval_command(self, config: str | Path) -> list[str]:
        """``workbench eval CONFIG --backend ray`` joining this cluster."""
        return self.command(sys.executable, "-m", "workbench.cli", "eval", str(config),
                            "--backend", "ray", "--address", self.address)

    @staticmethod
    def kill(index: int) -> int:
        """Host ``index`` loses power: every process of its namespace SIGKILLed."""
        return kill_namespace(index)


#: How fast the head declares a silent node dead: a check a second, dead after five
#: missed (Ray's defaults, 3 s and 5 with a 10 s timeout, take some 25 s, most of a
#: killed-host run's time; five misses of 2 s still ride out a busy 2-core machine).
HEALTH_CHECK = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "2000",
                "RAY_health_check_failure_threshold": "5"}


@contextlib.contextmanager
def two_hosts(cpus: int = 2, python_path: Sequence[str] = ()) -> Iterator[TwoHosts]:
    """Make the namespaces, start the head and the worker node (``cpus`` each), yield the
    cluster, and remove everything on leaving. ``python_path``: folders the nodes' worker
    processes import from (plugins of a test, say)."""
    why = make_namespaces()
    if why:
        raise HostsUnavailable(f"network namespaces cannot be made here: {why}")
    temp = tempfile.mkdtemp(prefix="wbr", dir="/tmp")  # short: Ray's sockets live there
    paths = [*python_path, os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.urandom(16).hex(),
           "PYTHONPATH": os.pathsep.join(p for p in paths if p), **HEALTH_CHECK}
    ray = str(Path(sys.executable).with_name("ray"))
    head = [ray, "start", "--head", "--node-ip-address", ADDRESSES[0], "--port", str(PORT),
            "--num-cpus", str(cpus), "--include-dashboard", "false", "--disable-usage-stats",
            "--temp-dir", temp]
    node = [ray, "start", "--address", f"{ADDRESSES[0]}:{PORT}", "--node-ip-address",
            ADDRESSES[1], "--num-cpus", str(cpus), "--disable-usage-stats"]
    try:
        for index, command in ((0, head), (1, node)):
            done = subprocess.run(in_namespace(index, *command), env=env, capture_output=True,
                                  text=True, timeout=180)
            if done.returncode:
                raise HostsUnavailable(f"`ray start` failed on host {index}: "
                                       f"{done.stderr.strip()[-500:]}")
        yield TwoHosts(env)
    finally:
        remove_namespaces()
        shutil.rmtree(temp, ignore_errors=True)


def run_on_two_hosts(run: dict[str, Any], folder: str | Path, cpus: int = 2,
                     timeout_s: float = 1800) -> tuple[pd.DataFrame, float]:
    """Run the evaluation ``run`` (a config mapping, its ``ray`` section naming the
    shards) over a fresh two-host cluster; its records and the driver's seconds (from
    starting ``workbench eval`` to its exit: the whole call, the cluster already up)."""
    from workbench.records import load_results

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "two-hosts.yaml"
    config.write_text(yaml.safe_dump({**run, "output_dir": str(folder / "run")}))
    with two_hosts(cpus) as cluster:
        start = time.perf_counter()
        done = subprocess.run(cluster.eval_command(config), env=cluster.env,
                              capture_output=True, text=True, timeout=timeout_s)
        seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"the two-host run failed: {done.stderr.strip()[-1000:]}")
    return load_results(folder / "run" / "records.sqlite"), seconds
