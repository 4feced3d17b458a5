"""Throughput and latency of `workbench serve-policy`, batched across connections against
one inference at a time, side by side in one run.

Two servers of the same policy run as real processes (the CLI): ``one-at-a-time``
(``--max-batch 1``) and ``batched`` (``--max-batch 8 --max-wait-ms W``). For each number
of concurrent clients (1, 2, 4, 8) and each server, in interleaved rounds (A B A B ...),
every client sends ``--requests`` observations one after another (each waits for its
reply) over its own connection on the workbench wire; the row reports requests per second
(all clients' replies over the wall time from the first send to the last reply) and the
p50 and p99 of the per-request latency, then the medians and ranges over the rounds.
Every ratio names its two rows. The policy is the ``vision`` CNN reading two cameras and
the state (224x224 at full size), with random weights: its cost, not its skill, is what
is measured. Both servers run with the same torch threads (``--threads``).

The ceiling batching can reach is the policy's own: after the servers stop, the same
policy is loaded in this process with the same threads, and ``act_batch`` is timed at
each batch size (interleaved repeats, median): ``ceiling_at_B`` = seconds per observation
at batch 1 over seconds per observation at batch B. No server can batch its way past
that ratio; a server below 1 loses to one-at-a-time by its own overhead.

    .venv/bin/python perf/policy_server.py            # full: 224 px, 3 rounds
    .venv/bin/python perf/policy_server.py --quick    # 64 px, 1 round, 1 and 4 clients

Results: ``perf/results/policy_server[_quick].{json,txt}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from workbench.contracts.wire import decode, encode  # noqa: E402

RESULTS = ROOT / "perf" / "results"
MODES = {"one-at-a-time": ["--max-batch", "1"], "batched": ["--max-batch", "8"]}
TARGET = ("batched", "one-at-a-time", 4, 1.5)
"""(numerator, denominator, clients, ratio): the issue's target, reported either way."""


def start_server(mode: str, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    env = os.environ | {"OMP_NUM_THREADS": str(args.threads),
                        "MKL_NUM_THREADS": str(args.threads)}
    command = [str(Path(sys.executable).parent / "workbench"), "serve-policy", "vision",
               "--protocol", "metaworld-v1", "--set", f"threads={args.threads}",
               "--set", "chunk_size=8", *MODES[mode], "--max-wait-ms", str(args.wait_ms),
               "--port", "0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if " at ws://" not in line:
        raise RuntimeError(f"server {mode} did not start: {line}")
    return proc, line.rsplit(" at ", 1)[1].strip()


def observation(size: int, k: int) -> dict[str, Any]:
    rng = np.random.default_rng(k)
    return {"images.primary": rng.integers(0, 256, (size, size, 3), dtype=np.uint8),
            "images.wrist": rng.integers(0, 256, (size, size, 3), dtype=np.uint8),
            "state": rng.normal(size=4).astype(np.float32), "instruction": "reach the goal"}


def client(url: str, frames: list[bytes], latencies: list[float], errors: list[str],
           start: threading.Barrier) -> None:
    with connect(url, compression=None, max_size=None) as ws:
        ws.recv(timeout=60)  # metadata
        start.wait()
        for frame in frames:
            began = time.perf_counter()
            ws.send(frame)
            reply = decode(ws.recv(timeout=120))
            latencies.append(time.perf_counter() - began)
            if "actions" not in reply:
                errors.append(str(reply))


def measure(url: str, clients: int, args: argparse.Namespace) -> dict[str, Any]:
    frames = [encode(observation(args.image_size, k)) for k in range(args.requests)]
    latencies: list[float] = []
    errors: list[str] = []
    start = threading.Barrier(clients + 1)
    threads = [threading.Thread(target=client, args=(url, frames, latencies, errors, start))
               for _ in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed: {errors[0]}")
    ms = np.asarray(latencies) * 1000
    return {"requests": len(latencies), "wall_s": wall, "requests_per_s": len(latencies) / wall,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def batching_ceiling(args: argparse.Namespace, sizes: list[int],
                     repeats: int = 7) -> list[dict[str, Any]]:
    """The policy's own seconds per observation at each batch size, in this process."""
    import torch

    from workbench.contracts.capabilities import EpisodeContext, LoadContext
    from workbench.policies import make_policy

    torch.set_num_threads(args.threads)
    policy = make_policy("vision", protocol="metaworld-v1", chunk_size=8, threads=args.threads)
    policy.load(LoadContext("metaworld-v1"))
    batches = {}
    for size in sizes:
        for k in range(size):
            policy.reset(EpisodeContext(f"b{size}-{k}", "reach-v3", "", 0))
        batches[size] = [observation(args.image_size, k) | {"episode_id": f"b{size}-{k}",
                                                             "step": 0} for k in range(size)]
        policy.act_batch(batches[size])  # warm
    times: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(repeats):
        for size in sizes:
            began = time.perf_counter()
            for _ in range(max(1, 16 // size)):
                policy.act_batch(batches[size])
            calls = max(1, 16 // size)
            times[size].append((time.perf_counter() - began) / (calls * size))
    per_one = statistics.median(times[1])
    return [{"batch": size, "ms_per_observation": statistics.median(times[size]) * 1000,
             "ceiling": per_one / statistics.median(times[size])} for size in sizes]


def stats_of(url: str) -> dict[str, Any]:
    import urllib.request

    port = url.rsplit(":", 1)[1]
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10).read())


def summarize(rows: list[dict[str, Any]], counts: list[int]) -> dict[str, Any]:
    table, ratios = [], []
    for clients in counts:
        medians = {}
        for mode in MODES:
            mine = [r for r in rows if r["clients"] == clients and r["mode"] == mode]
            entry = {"mode": mode, "clients": clients}
            for key in ("requests_per_s", "p50_ms", "p99_ms"):
                values = [r[key] for r in mine]
                entry |= {key: statistics.median(values), f"{key}_min": min(values),
                          f"{key}_max": max(values)}
            entry["mean_batch"] = statistics.median(r["mean_batch"] for r in mine)
            table.append(entry)
            medians[mode] = entry["requests_per_s"]
        ratios.append({"numerator": f"batched, {clients} clients",
                       "denominator": f"one-at-a-time, {clients} clients",
                       "quantity": "median requests/s",
                       "value": medians["batched"] / medians["one-at-a-time"]})
    return {"rows": table, "ratios": ratios}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 px, 1 round, 1 and 4 clients")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (3)")
    parser.add_argument("--requests", type=int, default=None, help="requests per client")
    parser.add_argument("--image-size", type=int, default=None, help="camera size in pixels")
    parser.add_argument("--clients", type=int, nargs="*", default=None, help="client counts")
    parser.add_argument("--wait-ms", type=float, default=5.0, help="batched server's wait")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per server")
    parser.add_argument("--out", default=None, help="results file stem")
    args = parser.parse_args(argv)
    quick = args.quick
    args.rounds = args.rounds or (1 if quick else 3)
    args.requests = args.requests or (8 if quick else 40)
    args.image_size = args.image_size or (64 if quick else 224)
    counts = args.clients or ([1, 4] if quick else [1, 2, 4, 8])
    servers = {mode: start_server(mode, args) for mode in MODES}
    rows = []
    try:
        for _, url in servers.values():  # warm: the first call builds torch's kernels
            measure(url, 1, argparse.Namespace(**vars(args) | {"requests": 2}))
        for round_ in range(args.rounds):
            for clients in counts:
                order = list(MODES) if round_ % 2 == 0 else list(MODES)[::-1]
                for mode in order:
                    url = servers[mode][1]
                    before = stats_of(url)
                    row = measure(url, clients, args)
                    after = stats_of(url)
                    served = after["observations"] - before["observations"]
                    batches = sum(after["batches"].values()) - sum(before["batches"].values())
                    rows.append({"round": round_, "clients": clients, "mode": mode, **row,
                                 "mean_batch": served / max(batches, 1)})
                    print(f"round {round_} {clients} clients {mode:>14}: "
                          f"{row['requests_per_s']:6.1f} req/s, p50 {row['p50_ms']:6.1f} ms, "
                          f"p99 {row['p99_ms']:6.1f} ms, batch {rows[-1]['mean_batch']:.2f}",
                          flush=True)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)
    ceiling = batching_ceiling(args, [1, *[c for c in counts if c > 1]])
    result = {"settings": {"image_size": args.image_size, "requests": args.requests,
                           "rounds": args.rounds, "clients": counts, "wait_ms": args.wait_ms,
                           "torch_threads": args.threads, "policy": "vision (random weights, "
                           "two cameras and state, chunk 8)", "cpus": os.cpu_count(),
                           "machine": platform.processor() or platform.machine()},
              "measured": rows, **summarize(rows, counts), "ceiling": ceiling}
    numerator, denominator, clients, wanted = TARGET
    if clients in counts:
        value = next(r["value"] for r in result["ratios"]
                     if r["numerator"] == f"{numerator}, {clients} clients")
        result["target"] = {"ratio": f"{numerator} / {denominator} at {clients} clients",
                            "wanted": wanted, "value": value, "met": value >= wanted}
    write(result, args.out or ("policy_server_quick" if quick else "policy_server"))
    return result


def write(result: dict[str, Any], stem: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=1))
    lines = [f"policy server, {result['settings']}", "",
             f"{'clients':>7} {'mode':>14} {'req/s':>8} {'(range)':>15} {'p50 ms':>8} "
             f"{'p99 ms':>8} {'batch':>6}"]
    for r in result["rows"]:
        lines.append(f"{r['clients']:>7} {r['mode']:>14} {r['requests_per_s']:8.1f} "
                     f"({r['requests_per_s_min']:6.1f}-{r['requests_per_s_max']:6.1f}) "
                     f"{r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {r['mean_batch']:6.2f}")
    lines += [""] + [f"{r['numerator']} / {r['denominator']} ({r['quantity']}): "
                     f"{r['value']:.2f}" for r in result["ratios"]]
    lines += ["", "the policy's own act_batch in one process (the ceiling of batching):"] + [
        f"  batch {c['batch']}: {c['ms_per_observation']:.2f} ms per observation, "
        f"ceiling {c['ceiling']:.2f}x" for c in result["ceiling"]]
    if "target" in result:
        t = result["target"]
        lines.append(f"target {t['ratio']} >= {t['wanted']}: {t['value']:.2f} "
                     f"({'met' if t['met'] else 'not met'})")
    (RESULTS / f"{stem}.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
