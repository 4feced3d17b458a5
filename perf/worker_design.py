"""A design probe for the policy-bound regime (issue 22): would simulator workers that each
step several environments reach the bound that today's pool misses?

Today's pool (``EvalPool``) runs one environment per worker process: on two cores the
policy-bound rows run 16 workers and 2 replicas, every step a pipe round trip that wakes
a process, and batches form only from whichever workers have asked (5.9 of 8 on
average). The design probed here: ``--workers`` processes (one per core), each stepping
``--envs`` environments, one thread per environment running the workbench's one step loop
(:func:`~workbench.runtime.episode.run_episode`, unchanged), whose policy calls a
per-process batcher sends as one message once every thread with work left has asked;
one responder process per worker loads the policy and answers each message with one
batched call. Each worker and its responder then have one runnable process between them
at any time, and every batch is full until the worker's last episodes.

This is a probe, not the product: no records, no failure handling, no timeouts. It runs
the policy-bound regime's episodes (the MLP-cost expert, 1024 x 20, 10 MT10 tasks) in
interleaved rounds with the regime's bound and today's pool (``perf/throughput.py``'s
rows, the same code), checks that every episode's outcome equals the pool's, and prints
one JSON line with the rows and the ratios ``design_over_bound``, ``pool_over_bound`` and
``design_over_pool`` (per round, then median, min and max).

    python perf/worker_design.py [--tasks 10] [--episodes 8] [--rounds 3] [--envs 8]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                  "LP_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import deque  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Sequence  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil  # noqa: E402

import workbench  # noqa: E402
from throughput import PolicyBound, provenance  # noqa: E402
from workbench.contracts import use_headless_rendering  # noqa: E402
from workbench.contracts.capabilities import LoadContext  # noqa: E402
from workbench.runtime.episode import run_episode, warm_up  # noqa: E402
from workbench.runtime.pool import process_context  # noqa: E402
from workbench.runtime.replica import pin_threads  # noqa: E402


def responder_main(factory: Callable[[], Any], context: LoadContext, conn: Any) -> None:
    """Loads the policy, then answers each message (a list of ``(kind, payload)``, one per
    thread of its worker) with one list: resets and ends one by one, acts in one batch."""
    pin_threads(1)
    import torch

    torch.set_num_threads(1)
    policy = factory()
    policy.load(context)
    conn.send("ready")
    while (message := conn.recv()) is not None:
        replies: list[Any] = [None] * len(message)
        acts = []
        for i, (kind, payload) in enumerate(message):
            if kind == "reset":
                policy.reset(payload)
            elif kind == "end":
                policy.end_episode(payload)
            else:
                acts.append((i, payload))
        if acts:
            for (i, _), action in zip(acts, policy.act_batch([obs for _, obs in acts])):
                replies[i] = action
        conn.send(replies)


class Batcher:
    """One worker's policy calls: a thread's call waits until every thread with work left
    has one waiting, then the batch goes to the responder as one message."""

    def __init__(self, conn: Any, threads: int) -> None:
        self.conn, self.active = conn, threads
        self.cond = threading.Condition()
        self.pending: dict[int, tuple[str, Any]] = {}
        self.replies: dict[int, Any] = {}
        self.sizes: list[int] = []

    def call(self, kind: str, payload: Any) -> Any:
        me = threading.get_ident()
        with self.cond:
            self.pending[me] = (kind, payload)
            self._send_if_all_asked()
            while me not in self.replies:
                self.cond.wait()
            return self.replies.pop(me)

    def done(self) -> None:
        with self.cond:
            self.active -= 1
            self._send_if_all_asked()

    def _send_if_all_asked(self) -> None:
        if self.pending and len(self.pending) >= self.active:
            ids, batch = list(self.pending), list(self.pending.values())
            self.pending = {}
            self.sizes.append(sum(kind == "act" for kind, _ in batch))
            self.conn.send(batch)  # every other thread waits: holding the lock costs nothing
            self.replies.update(zip(ids, self.conn.recv()))
            self.cond.notify_all()


class Proxy:
    """What one thread's step loop sees as its policy."""

    def __init__(self, batcher: Batcher, capabilities: Any) -> None:
        self.batcher, self.capabilities = batcher, capabilities

    def reset(self, context: Any) -> None:
        self.batcher.call("reset", context)

    def act(self, observation: Any) -> Any:
        return self.batcher.call("act", observation)

    def end_episode(self, episode_id: str) -> None:
        self.batcher.call("end", episode_id)


def worker_main(adapter_factory: Callable[[], Any], capabilities: Any, specs: Sequence[Any],
                envs: int, max_steps: int | None, responder: Any, control: Any) -> None:
    """Builds ``envs`` environments for ``specs``' tasks, then, on "go", runs ``specs``
    (a shared queue) on one thread per environment; sends each episode's outcome and the
    batch sizes."""
    pin_threads(1)
    use_headless_rendering()
    adapters = [adapter_factory() for _ in range(envs)]
    for adapter in adapters:
        warm_up(adapter, list(specs), capabilities.features)
    queue, lock = deque(specs), threading.Lock()
    batcher = Batcher(responder, envs)
    proxy = Proxy(batcher, capabilities)
    outcomes: dict[str, tuple[bool, int, str | None]] = {}

    def run(adapter: Any) -> None:
        while True:
            with lock:
                if not queue:
                    break
                spec = queue.popleft()
            result = run_episode(adapter, proxy, spec, False, max_steps=max_steps)
            outcomes[spec.episode_id] = (result.success, result.steps,
                                         None if result.error_kind is None
                                         else result.error_message)
        batcher.done()

    control.send("ready")
    control.recv()
    threads = [threading.Thread(target=run, args=(a,)) for a in adapters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    control.send((outcomes, batcher.sizes))


def run_design(bench: PolicyBound, workers: int, envs: int) -> dict:
    """The design's row: ``workers`` processes of ``envs`` environments and one responder
    each; the plan split round-robin; warm rate from "go" to the last worker's end."""
    parts = bench.parts
    ctx = process_context(parts.preload)
    procs, controls, responders = [], [], []
    start = time.perf_counter()
    for w in range(workers):
        here, there = ctx.Pipe()
        responder = ctx.Process(target=responder_main, args=(
            parts.policy_factory, LoadContext(parts.protocol.name, "cpu", w), there),
            daemon=True)
        responder.start()
        control, control_there = ctx.Pipe()
        worker = ctx.Process(target=worker_main, args=(
            parts.adapter_factory, parts.capabilities, bench.plan[w::workers], envs,
            bench.config.max_steps, here, control_there), daemon=True)
        worker.start()
        procs += [responder, worker]
        controls.append(control)
        responders.append(here)
        if here.recv() != "ready":
            raise RuntimeError("responder failed to start")
    for control in controls:
        if control.recv() != "ready":
            raise RuntimeError("worker failed to start")
    go = time.perf_counter()
    for control in controls:
        control.send("go")
    outcomes, sizes = {}, []
    for control in controls:
        found, batches = control.recv()
        outcomes.update(found)
        sizes += batches
    wall = time.perf_counter() - go
    for conn in responders:
        conn.send(None)
    for proc in procs:
        proc.join(timeout=10)
    steps = sum(steps for _, steps, _ in outcomes.values())
    errors = [m for _, _, m in outcomes.values() if m is not None]
    acts = [s for s in sizes if s]
    return {"system": "design", "config": f"{workers}w x {envs} envs", "steps": steps,
            "episodes": len(outcomes), "eval_s": wall, "e2e_s": time.perf_counter() - start,
            "steps_per_s": steps / wall, "mean_batch": sum(acts) / max(len(acts), 1),
            "errors": errors,
            "outcomes": {k: [bool(s), int(n)] for k, (s, n, _) in outcomes.items()}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10, help="first K MT10 tasks (10)")
    parser.add_argument("--episodes", type=int, default=8, help="episodes per task (8)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", type=int, default=None,
                        help="environments per design worker (the pool's workers / cores)")
    parser.add_argument("--pool-workers", type=int, default=None, help="8 x cores")
    parser.add_argument("--mlp", default="1024x20", metavar="WIDTHxLAYERS")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    started = provenance()
    use_headless_rendering()
    cores = psutil.cpu_count() or 1
    width, layers = (int(v) for v in args.mlp.lower().split("x"))
    tasks = list(workbench.load_config(dict(benchmark="metaworld", suite="MT10", episodes=1,
                                            policy="zero")).task_names())[:args.tasks]
    bench = PolicyBound(tasks, args.episodes, args.max_steps, cores, width, layers,
                        args.pool_workers)
    envs = args.envs or bench.batch
    rows_of_the_regime = bench.table()  # its bound and pool, as perf/throughput.py runs them
    table = {"bound": rows_of_the_regime["policy-bound bound"],
             "pool": rows_of_the_regime["policy-bound pool"],
             "design": lambda r: run_design(bench, cores, envs)}
    rows, orders = [], []
    for round_ in range(args.rounds):
        order = list(table)
        random.Random(args.seed * 1000 + round_).shuffle(order)
        orders.append(order)
        for name in order:
            row = table[name](round_)
            row.update(system=name, round=round_)
            rows.append(row)
            print(f"round {round_} {name:8s} {row['steps_per_s']:8.2f} steps/s  "
                  f"eval {row['eval_s']:6.1f} s  batch {row.get('mean_batch', '-')}",
                  flush=True)
    ratios = {}
    for name, top, bottom in (("design_over_bound", "design", "bound"),
                              ("pool_over_bound", "pool", "bound"),
                              ("design_over_pool", "design", "pool")):
        values = [next(r for r in rows if r["system"] == top and r["round"] == k)["steps_per_s"]
                  / next(r for r in rows if r["system"] == bottom and r["round"] == k)[
                      "steps_per_s"] for k in range(args.rounds)]
        ratios[name] = {"numerator": top, "denominator": bottom,
                        "value": statistics.median(values), "min": min(values),
                        "max": max(values)}
    agree = all(_same_outcomes(d, p) for d in rows if d["system"] == "design"
                for p in rows if p["system"] == "pool" and p["round"] == d["round"])
    summary = {"provenance": started,
               "workload": {"tasks": tasks, "episodes_per_task": args.episodes,
                            "mlp": args.mlp, "cores": cores, "envs": envs,
                            "pool_workers": bench.workers, "rounds": args.rounds,
                            "orders": orders},
               "rows": [{k: v for k, v in r.items() if k not in ("_df", "outcomes")}
                        for r in rows],
               "ratios": ratios, "outcomes_agree": agree}
    for name, r in ratios.items():
        print(f"{name:18s} {r['value']:.2f} ({r['min']:.2f}-{r['max']:.2f})")
    print(f"outcomes of the design equal the pool's on every episode: {agree}")
    line = json.dumps(summary, default=str)
    if args.json:
        Path(args.json).write_text(line + "\n")
    print(line)
    return summary


def _same_outcomes(design: dict, pool: dict) -> bool:
    """Every episode's success and step count equal in the design's row and the pool's."""
    df = pool["_df"]
    found = {eid: [bool(s), int(n)] for eid, s, n in
             zip(df["episode_id"], df["success"], df["steps"])}
    return not design["errors"] and found == design["outcomes"]


if __name__ == "__main__":
    main()
