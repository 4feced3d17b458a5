"""Simulator workers and policy replicas as two pools, sized independently.

``EvalPool`` starts worker and replica processes as they are needed (:meth:`EvalPool.grow`,
up to its limits; each keeps its simulator, renderer or model for its life), connected
by a pipe per (worker, replica) pair. :meth:`EvalPool.configure` chooses
how many of each take part, which replica serves which worker, and how many
environments each worker steps (``envs_per_worker``); :meth:`EvalPool.run` hands out
episodes one at a time to workers with an idle environment (a worker of several
environments also holds one queued, so its next starts at once) and records each result
through a :class:`~workbench.runtime.sink.RecordSink`.

Failures: a worker that dies has its in-flight episodes recorded as infrastructure
errors (never retried) and the run goes on with the others; a replica that dies fails
the episodes it was serving (infrastructure) and its workers move to a live replica.
"""

from __future__ import annotations

import multiprocessing as mp
import re
import sys
import time
from collections import deque
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Mapping, Sequence

from workbench.config import PoolConfig
from workbench.contracts.capabilities import LoadContext
from workbench.contracts.plan import EpisodeSpec
from workbench.contracts.results import EpisodeResult, ErrorKind, PolicyLoadFailed
from workbench.contracts.rendering import use_headless_rendering
from workbench.errors import WorkbenchError
from workbench.runtime.resources import ResourceMonitor
from workbench.runtime.episode import EpisodeOptions
from workbench.runtime.job import Components
from workbench.runtime.replica import HARNESS_EXIT_CODE, ReplicaStats, replica_main
from workbench.runtime.sink import RecordSink, RunReport
from workbench.runtime.worker import worker_main

STATS_TIMEOUT_S = 5.0  # an idle replica answers a stats request at once
CLOSE_GRACE_S = 10.0
"""How long a closing pool waits for its processes to stop before it kills them."""


@dataclass
class _Proc:
    process: Any
    control: Connection
    alive: bool = True
    info: Any = None


class EvalPool:
    """Worker and replica processes kept warm across runs (probes and evaluations)."""

    def __init__(self, parts: Components, workers: int, replicas: int = 1,
                 worker_threads: int = 1, replica_threads: int = 1,
                 slot_bytes: int | None = None,
                 limits: tuple[int, int] | None = None) -> None:
        self.parts = parts
        self.slot_bytes = slot_bytes or max(parts.camera_count, 1) * parts.image_size ** 2 * 3
        self.threads = (worker_threads, replica_threads)
        self.workers: list[_Proc] = []
        self.replicas: list[_Proc] = []
        self.replica_rss: list[int] = []
        self.replica_gpu_bytes: list[int] = []
        self.config: PoolConfig | None = None
        self.observe_every_step = False
        self.assignment: dict[int, int] = {}
        self.limits = limits or (workers, replicas)
        """The most workers and replicas :meth:`configure` may start (a search's limits)."""
        self.grow(workers, replicas)

    def grow(self, workers: int, replicas: int) -> None:
        """Start processes until ``workers`` workers and ``replicas`` replicas have been
        started (dead ones count: nothing is restarted). Each new process is connected to
        every other side's processes, old ones too, by a pipe per (worker, replica) pair;
        old processes receive their ends of the new pipes over their control pipes."""
        old_w, old_r = len(self.workers), len(self.replicas)
        all_w, all_r = range(max(workers, old_w)), range(max(replicas, old_r))
        if len(all_w) == old_w and len(all_r) == old_r:
            return
        parts, ctx, path = self.parts, process_context(self.parts.preload), list(sys.path)
        pipes = {(w, r): ctx.Pipe() for w in all_w for r in all_r if w >= old_w or r >= old_r}
        started = []
        for r in all_r[old_r:]:
            started.append(self._start(
                ctx, replica_main, r, parts.policy_factory,
                LoadContext(parts.protocol.name, _device(parts.device, r), r), path,
                {w: pipes[w, r][1] for w in all_w}, self.threads[1]))
        for w in range(old_w):  # old workers learn of the new replicas
            for r in all_r[old_r:]:
                _send(self.workers[w], ("attach", (r, pipes[w, r][0])))
        for w in all_w[old_w:]:
            started.append(self._start(
                ctx, worker_main, w, parts.adapter_factory, parts.capabilities,
                self.slot_bytes, path, {r: pipes[w, r][0] for r in all_r}, self.threads[0]))
        for r in range(old_r):  # old replicas learn of the new workers
            for w in all_w[old_w:]:
                _send(self.replicas[r], ("attach", (w, pipes[w, r][1])))
        for a, b in pipes.values():  # the children hold them now; EOF must reach them
            a.close(), b.close()
        self.replicas += [p for p in started if p.process.name.startswith("replica")]
        self.workers += [p for p in started if p.process.name.startswith("worker")]
        self._wait_started(started)
        self.replica_rss = [p.info[1] for p in self.replicas]
        self.replica_gpu_bytes = [p.info[3] for p in self.replicas]

    @staticmethod
    def _start(ctx: Any, target: Callable, index: int, *args: Any) -> _Proc:
        parent, child = ctx.Pipe()
        process = ctx.Process(target=target, args=(index, *args[:-2], child, *args[-2:]),
                              daemon=True, name=f"{target.__name__}-{index}")
        process.start()
        child.close()
        return _Proc(process, parent)

    def _wait_started(self, started: Sequence[_Proc]) -> None:
        for proc in started:
            try:
                proc.info = _expect(proc.control, ("loaded", "ready", "load_failed"),
                                    timeout=600)
            except RuntimeError as exc:
                self.close()
                raise RuntimeError(
                    f"{proc.process.name} failed to start ({exc}; exit code "
                    f"{proc.process.exitcode}). A script that starts a pool needs "
                    "`if __name__ == '__main__':`, and policies and adapters must be importable "
                    "by their module; the child's traceback is above.") from None
            if proc.info[0] == "load_failed":  # the policy's own error, in a replica
                self.close()
                raise PolicyLoadFailed.of(self.parts.policy_name, proc.info[1])

    # -- configuration ----------------------------------------------------------
    def live_workers(self) -> list[int]:
        return [i for i, p in enumerate(self.workers) if p.alive and p.process.is_alive()]

    def live_replicas(self) -> list[int]:
        return [i for i, p in enumerate(self.replicas) if p.alive and p.process.is_alive()]

    def configure(self, config: PoolConfig, observe_every_step: bool = False) -> None:
        """Use ``config.workers`` live workers and ``config.replicas`` live replicas,
        starting more first while the pool's :attr:`limits` allow."""
        self.grow(min(config.workers, max(self.limits[0], len(self.workers))),
                  min(config.replicas, max(self.limits[1], len(self.replicas))))
        workers, replicas = self.live_workers(), self.live_replicas()
        if config.workers > len(workers) or config.replicas > len(replicas):
            raise ValueError(f"pool has {len(workers)} live workers and {len(replicas)} live "
                             f"replicas; asked for {config.workers} and {config.replicas}")
        self.config, self.observe_every_step = config, observe_every_step
        self._assign(workers[:config.workers], replicas[:config.replicas])

    def _assign(self, workers: Sequence[int], replicas: Sequence[int]) -> None:
        cfg = self.config
        self.assignment = {w: replicas[i % len(replicas)] for i, w in enumerate(workers)}
        for r in self.live_replicas():
            mine = [w for w, rr in self.assignment.items() if rr == r]
            self.replicas[r].control.send(("configure", {
                "workers": mine, "max_batch": cfg.batch, "max_wait_ms": cfg.max_wait_ms}))
            _expect(self.replicas[r].control, ("configured",), timeout=120)
        for w, r in self.assignment.items():
            self.workers[w].control.send(("configure", (r, cfg.envs_per_worker)))

    def warm_up(self, plan: Sequence[EpisodeSpec]) -> dict[int, list[str]]:
        """Have every live worker build the environments and renderers of ``plan``'s tasks
        that it has not built yet; returns the tasks each worker built now."""
        for w in self.live_workers():
            self.workers[w].control.send(("warmup", list(plan)))
        return {w: _expect(self.workers[w].control, ("warm",), timeout=600)[2]
                for w in self.live_workers()}

    # -- running ----------------------------------------------------------------
    def run(self, plan: Sequence[EpisodeSpec], sink: RecordSink | None = None,
            options: EpisodeOptions | None = None, videos: set[str] | frozenset = frozenset(),
            time_limit_s: float | None = None,
            expected_steps: Mapping[str, float] | None = None) -> RunReport:
        """Run ``plan``'s episodes that ``sink`` still has pending (all of them without a
        sink: a probe, recording nothing), each as ``options`` says (default: the pool's
        observation schedule, no files), filming those in ``videos``. Episodes start
        longest-expected-first (:func:`longest_first`), so the run's tail is short
        episodes: expected from ``expected_steps`` (per task) and, once a task's episodes
        finish in this run, from their mean steps (tasks not yet seen go first, taking turns)."""
        if self.config is None:
            raise RuntimeError("EvalPool.run() before configure()")
        sink = sink or RecordSink(None, "probe")
        options = options or EpisodeOptions(self.observe_every_step, "probe")
        pending = sink.pending(plan)
        pending = longest_first(pending, expected_steps or {})
        state = _RunState(deque(pending), sink, options, set(videos),
                          expected=dict(expected_steps or {}))
        deadline = None if time_limit_s is None else time.perf_counter() + time_limit_s
        gpu = 0 if self.parts.device.startswith("cuda") else None
        with ResourceMonitor(self.pids(in_use=True), interval_s=0.5, children=False,
                             gpu_index=gpu) as monitor:
            while state.queue or state.busy():
                if deadline is not None and time.perf_counter() > deadline:
                    state.failures.append(f"episodes did not finish within {time_limit_s:.0f} s")
                    break
                if not self._dispatch(state):
                    break
                self._collect(state, timeout=0.25)
            if state.busy():  # only after a time limit: let the stragglers finish
                self._drain(state)
        usage = monitor.result
        return RunReport("pool", self.config, list(sink.rows), usage.wall_s, usage.cores_busy,
                         usage.peak_rss_bytes,
                         replica_stats=self.replica_stats(),
                         complete=not (state.queue or state.busy() or state.stopped),
                         failures=state.failures, gpu_util_pct=usage.gpu.util_mean_pct)

    def _dispatch(self, state: "_RunState") -> bool:
        """Start episodes on idle workers; False once nothing more can run. When no live
        worker or no live replica is left the queue stays unclaimed (unattempted, for a
        resume) instead of being burnt as infrastructure errors, and the run stops once
        the episodes in flight are back."""
        if state.queue and not self._can_run(state):
            state.queue.clear()
            state.stopped = True
        if state.learnt:  # longest first, with what this run's episodes have shown
            state.queue = deque(longest_first(state.queue, state.expectations()))
            state.learnt = False
        envs = self.config.envs_per_worker if self.config else 1
        most = envs + 1 if envs > 1 else 1  # one queued on a worker of lanes: see Lanes
        for w in list(self.assignment):
            running = state.in_flight.setdefault(w, {})
            while len(running) < most and state.queue and w in self.assignment:
                if not self.workers[w].process.is_alive() and not running:
                    self._worker_died(state, w)  # died while idle: nothing was lost
                    break
                spec = state.queue.popleft()
                if not state.sink.claim(spec, f"worker-{w}"):
                    continue
                running[spec.episode_id] = spec
                options = replace(state.options, video=spec.episode_id in state.videos)
                try:
                    self.workers[w].control.send(("run", (spec, options)))
                except (BrokenPipeError, OSError):
                    self._worker_died(state, w)
        if not state.busy() and state.queue and not self._can_run(state):
            state.queue.clear()  # every worker died as it was given one
            state.stopped = True
        return bool(state.queue or state.busy())

    def _can_run(self, state: "_RunState") -> bool:
        """Whether a live worker and a live replica remain; says which is gone if not."""
        workers = [w for w in self.assignment if self.workers[w].alive]
        replicas = [r for r in set(self.assignment.values()) if self.replicas[r].alive]
        if workers and replicas:
            return True
        gone = "simulator worker" if not workers else "policy replica"
        state.failures.append(f"no live {gone} left: {len(state.queue)} planned episodes "
                              "not attempted (they run on resume)")
        return False

    def _collect(self, state: "_RunState", timeout: float) -> None:
        busy = [w for w, running in state.in_flight.items() if running]
        controls = {self.workers[w].control: w for w in busy}
        sentinels = {self.workers[w].process.sentinel: ("worker", w) for w in busy}
        sentinels.update({self.replicas[r].process.sentinel: ("replica", r)
                          for r in set(self.assignment.values()) if self.replicas[r].alive})
        for ready in wait([*controls, *sentinels], timeout):
            if ready in controls:
                self._receive(state, controls[ready])
            elif sentinels[ready][0] == "worker":
                self._worker_died(state, sentinels[ready][1])
            else:
                self._replica_died(sentinels[ready][1])

    def _receive(self, state: "_RunState", w: int) -> None:
        try:
            _, (episode_id, result) = self.workers[w].control.recv()
        except (EOFError, OSError):
            return self._worker_died(state, w)
        spec = state.in_flight[w].pop(episode_id)
        state.sink.finish(spec, self._blame_replica_exit(result), f"worker-{w}")
        state.learnt = result.error_kind is None or state.learnt
        found = _DIED.search(result.error_message or "")
        if found is not None:  # its replica is gone (joined above): before the next claim
            r = int(found.group(1))
            if not self.replicas[r].process.is_alive():
                self._replica_died(r)

    def _blame_replica_exit(self, result: EpisodeResult) -> EpisodeResult:
        """A replica that *exited* (an exit code, not a signal) during the episode was
        ended by the policy's own code: the policy's failure. One killed by a signal (the
        kernel's out-of-memory killer, an operator) stays the harness's."""
        found = _DIED.search(result.error_message or "")
        if result.error_kind is not ErrorKind.INFRASTRUCTURE or found is None:
            return result
        proc = self.replicas[int(found.group(1))].process
        proc.join(timeout=2)
        if proc.exitcode is None or proc.exitcode < 0 or proc.exitcode == HARNESS_EXIT_CODE:
            return result
        return replace(result, error_kind=ErrorKind.POLICY, error_message=(
            f"{result.error_message}: the policy ended its replica process with exit code "
            f"{proc.exitcode}"))

    def _worker_died(self, state: "_RunState", w: int) -> None:
        proc = self.workers[w]
        if not proc.alive:
            return
        proc.alive = False
        proc.process.join(timeout=5)
        code = proc.process.exitcode
        state.failures.append(f"simulator worker {w} died (exit code {code})")
        self.assignment.pop(w, None)
        lanes = self.config is not None and self.config.envs_per_worker > 1
        for spec in state.in_flight.pop(w, {}).values():
            state.sink.fail(spec, f"simulator worker {w} died (exit code {code}) during the "
                                  f"episode{' or with it queued there' if lanes else ''}; "
                                  "not retried", f"worker-{w}")

    def _replica_died(self, r: int) -> None:
        proc = self.replicas[r]
        if not proc.alive:
            return
        proc.alive = False
        live = [x for x in set(self.assignment.values()) if x != r and self.replicas[x].alive]
        live = live or [x for x in self.live_replicas() if x != r]
        if live:  # its workers report their failed episodes, then move to a live replica
            self._assign(list(self.assignment), live)

    def _drain(self, state: "_RunState") -> None:
        """Wait for the episodes in flight (they are bounded by the step limit), so no
        late result can be mistaken for a later run's."""
        while state.busy():
            self._collect(state, timeout=1.0)

    def replica_stats(self) -> list[ReplicaStats]:
        """The statistics of each live assigned replica. One that died after the run's
        last episode (its exit not yet seen) is marked dead and has none; one still held
        by a policy call that never returned (its episode already failed for it) does not
        answer within ``STATS_TIMEOUT_S`` and has none."""
        out = []
        for r in sorted(set(self.assignment.values())):
            if not self.replicas[r].alive:
                continue
            try:
                self.replicas[r].control.send(("stats", None))
                out.append(_expect(self.replicas[r].control, ("stats",),
                                   timeout=STATS_TIMEOUT_S)[1])
            except (BrokenPipeError, ProcessExited, OSError):
                self._replica_died(r)
            except RuntimeError:  # no answer in time: stuck in a hung call
                continue
        return out

    def pids(self, in_use: bool = False) -> list[int]:
        """Process ids of the live workers and replicas; with ``in_use``, only of those the
        configuration uses (a run's CPU and memory are theirs: a worker started early for a
        search's next probe, or a replica a probe added that was not kept, sits idle)."""
        procs = self.workers + self.replicas
        if in_use and self.config is not None:
            procs = ([self.workers[w] for w in self.assignment]
                     + [self.replicas[r] for r in sorted(set(self.assignment.values()))])
        return [p.process.pid for p in procs if p.alive]

    def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Tell every process to stop; those still running ``grace_s`` after (one deadline
        for all, so N hung replicas cost one grace, not N) are killed."""
        procs = self.workers + self.replicas
        for proc in procs:
            try:
                proc.control.send(("stop", None))
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + grace_s
        for proc in procs:
            proc.process.join(timeout=max(0.0, deadline - time.monotonic()))
        for proc in procs:
            if proc.process.is_alive():
                proc.process.kill()
        for proc in procs:
            proc.process.join(timeout=5)

    def __enter__(self) -> "EvalPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_DIED = re.compile(r"policy replica (\d+) died")


@dataclass
class _RunState:
    queue: deque
    sink: RecordSink
    options: EpisodeOptions
    videos: set[str]
    in_flight: dict[int, dict[str, EpisodeSpec]] = field(default_factory=dict)
    """Per worker, its episodes running (by episode id)."""
    failures: list[str] = field(default_factory=list)
    stopped: bool = False

    expected: dict[str, float] = field(default_factory=dict)
    learnt: bool = False
    """Whether an episode finished without an error since the queue was last ordered."""

    def busy(self) -> bool:
        """Whether any episode is in flight."""
        return any(self.in_flight.values())

    def expectations(self) -> dict[str, float]:
        """Steps to expect per task: this run's own mean where it has one, else the
        estimate the run started with."""
        return self.expected | mean_steps_per_task(self.sink.rows)


def longest_first(specs: Sequence[EpisodeSpec],
                  expected_steps: Mapping[str, float]) -> list[EpisodeSpec]:
    """``specs`` ordered by their task's expected steps, longest first. Tasks without an
    estimate go before every other (their horizon bounds every estimate) and take turns,
    one episode of each before the second of any, so that each unknown task's first
    episode starts early and its length is learnt while most of the run is still queued
    (a plan lists a task's episodes together: in that order the tasks at its end would be
    learnt last, whatever their length). Ties keep the plan's order. Only the start order
    changes: an episode's outcome depends on its identity alone.

    >>> from workbench.contracts.plan import plan_episodes
    >>> plan = plan_episodes("m", "s", ["short", "long", "new", "newer"], 2)
    >>> [f"{s.task}/{s.episode_index}" for s in longest_first(plan, {"short": 40, "long": 300})]
    ['new/0', 'newer/0', 'new/1', 'newer/1', 'long/0', 'long/1', 'short/0', 'short/1']
    """
    turn: dict[str, int] = {}

    def key(spec: EpisodeSpec) -> tuple[int, float]:
        if spec.task in expected_steps:
            return 1, -expected_steps[spec.task]
        turn[spec.task] = turn.get(spec.task, -1) + 1
        return 0, turn[spec.task]

    keys = [key(s) for s in specs]  # in the given order: a task's turns count from its first
    return [s for _, s in sorted(zip(keys, specs), key=lambda pair: pair[0])]


def mean_steps_per_task(rows: Sequence[dict]) -> dict[str, float]:
    """Mean steps per task over finished episodes without an error.

    >>> rows = [{"task": "a", "steps": 10, "error_kind": None},
    ...         {"task": "a", "steps": 30, "error_kind": None},
    ...         {"task": "b", "steps": 5, "error_kind": "infrastructure"}]
    >>> mean_steps_per_task(rows)
    {'a': 20.0}
    """
    by_task: dict[str, list[int]] = {}
    for row in rows:
        if not isinstance(row.get("error_kind"), str) and row.get("steps") is not None:
            by_task.setdefault(row["task"], []).append(int(row["steps"]))
    return {task: sum(v) / len(v) for task, v in sorted(by_task.items())}


def process_context(preload: Sequence[str] = ()) -> Any:
    """The multiprocessing context for pool processes: a fork server that imports
    ``preload`` (the adapter's and policy's heavy modules) once, so each worker and
    replica starts without re-importing them. Headless rendering is chosen first: the
    server imports MuJoCo. (The server starts once per process; later preload lists
    do not change it.)"""
    use_headless_rendering()
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(preload))
    return ctx


def _send(proc: _Proc, message: Any) -> None:
    try:
        proc.control.send(message)
    except (BrokenPipeError, OSError):  # it died; the run that uses it records that
        pass


class ProcessExited(WorkbenchError, RuntimeError):
    """A pool process closed its pipe before sending the message waited for."""


def _expect(conn: Connection, kinds: tuple[str, ...], timeout: float) -> Any:
    try:
        if not conn.poll(timeout):
            raise RuntimeError(f"no {'/'.join(kinds)} message within {timeout:.0f} s")
        message = conn.recv()
    except (EOFError, OSError) as exc:
        raise ProcessExited(f"process exited before sending {'/'.join(kinds)}") from exc
    if message[0] not in kinds:
        raise RuntimeError(f"expected {'/'.join(kinds)}; got {message[0]!r}")
    return message


def _device(device: str, replica: int) -> str:
    if device == "cuda":
        import torch

        return f"cuda:{replica % max(torch.cuda.device_count(), 1)}"
    return device
