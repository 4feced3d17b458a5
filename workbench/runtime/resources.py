"""System resources: GPU utilization from NVML, CPU cores busy and peak RSS from psutil.

:func:`gpu_busy` samples one GPU's utilization for a while; it returns
``available=False`` with the reason (no ``pynvml``, no driver, no GPU) instead of
raising. :class:`ResourceMonitor` samples a process tree in a background thread
while its ``with`` block runs: CPU seconds over wall seconds ("cores busy"), peak
resident memory and, when a GPU is there, its mean utilization.

>>> with ResourceMonitor(gpu_index=None) as monitor:
...     _ = sum(range(100_000))
>>> usage = monitor.result
>>> usage.peak_rss_bytes > 0 and usage.wall_s > 0
True
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

import psutil


@dataclass(frozen=True)
class GpuSample:
    """NVML utilization of one GPU over a sampling window.

    util_mean_pct / util_max_pct: percent of time a kernel ran (NVML's "GPU
    utilization"), NaN when unavailable. memory_used_max_bytes: peak device memory
    in use (all processes). reason: why no GPU was sampled ("" when available).
    """

    available: bool
    reason: str = ""
    util_mean_pct: float = math.nan
    util_max_pct: float = math.nan
    memory_used_max_bytes: float = math.nan
    samples: int = 0
    device_name: str = ""


class _GpuSampler:
    """Opens NVML for one GPU; ``sample()`` records utilization; ``summary()`` sums up."""

    def __init__(self, index: int = 0) -> None:
        self.reason, self.name, self._handle, self._nvml = "", "", None, None
        self._util: list[float] = []
        self._memory: list[float] = []
        try:
            self._open(index)
        except Exception as exc:  # no module, no driver, no device: all mean "unavailable"
            self.reason = f"{type(exc).__name__}: {exc}".strip(": ")

    def _open(self, index: int) -> None:
        try:
            import pynvml
        except ImportError:
            raise RuntimeError("pynvml is not installed (pip install nvidia-ml-py)") from None
        pynvml.nvmlInit()
        self._nvml = pynvml
        count = pynvml.nvmlDeviceGetCount()
        if not 0 <= index < count:
            raise RuntimeError(f"no NVIDIA GPU with index {index} ({count} found)")
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(self._handle)
        self.name = name.decode() if isinstance(name, bytes) else str(name)

    @property
    def available(self) -> bool:
        return self._handle is not None

    def sample(self) -> None:
        if self._handle is None:
            return
        self._util.append(float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
        self._memory.append(float(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used))

    def summary(self) -> GpuSample:
        if self._handle is None:
            return GpuSample(False, self.reason or "NVML unavailable")
        if not self._util:
            return GpuSample(True, "no samples", device_name=self.name)
        return GpuSample(True, "", sum(self._util) / len(self._util), max(self._util),
                         max(self._memory), len(self._util), self.name)

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None


def gpu_busy(duration_s: float = 1.0, interval_s: float = 0.1, index: int = 0) -> GpuSample:
    """Sample GPU ``index``'s utilization every ``interval_s`` for ``duration_s`` seconds.

    Never raises for a missing GPU: the result then has ``available=False`` and a
    ``reason``.

    >>> sample = gpu_busy(duration_s=0.0)
    >>> sample.available or bool(sample.reason)
    True
    """
    sampler = _GpuSampler(index)
    try:
        if not sampler.available:
            return sampler.summary()
        deadline = time.perf_counter() + duration_s
        sampler.sample()
        while time.perf_counter() + interval_s <= deadline:
            time.sleep(interval_s)
            sampler.sample()
        return sampler.summary()
    finally:
        sampler.close()


def gpu_status(index: int = 0) -> str:
    """``"available"`` or ``"unavailable: <reason>"`` for GPU ``index``, without sampling."""
    sample = gpu_busy(duration_s=0.0, index=index)
    return "available" if sample.available else f"unavailable: {sample.reason}"


@dataclass(frozen=True)
class ResourceUsage:
    """What a :class:`ResourceMonitor` saw over its window.

    cpu_s: CPU seconds (user + system) used by the watched processes during the
    window; cores_busy = cpu_s / wall_s. peak_rss_bytes: largest summed resident
    memory of the tree at one sample (a shared page counts in every process holding it).
    processes: distinct processes seen. With ``pss`` sampling: peak_pss_bytes, the
    largest summed proportional set size at one sample (every page counted once),
    peak_pss_by_name, the largest PSS any one process of each name reached (a pool's
    processes are named ``wb-worker-N`` and ``wb-replica-N``), and pss_reads, how many
    times the tree's PSS was read (see :class:`ResourceMonitor`'s ``pss_interval_s``).
    """

    wall_s: float
    cpu_s: float
    cores_busy: float
    peak_rss_bytes: int
    processes: int
    samples: int
    gpu: GpuSample
    peak_pss_bytes: int = 0
    peak_pss_by_name: dict[str, int] = field(default_factory=dict)
    pss_reads: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Flat dict (GPU fields prefixed ``gpu_``), e.g. for a DataFrame row."""
        row = asdict(self)
        gpu = row.pop("gpu")
        return row | {f"gpu_{k}": v for k, v in gpu.items()}


class ResourceMonitor:
    """Samples a process tree (and one GPU) in a background thread while in ``with``.

    pids: root processes (default: this one); with ``children`` their descendants
    are watched too, including ones started during the window. A process that exits
    between two samples loses at most ``interval_s`` of CPU time from the count.
    gpu_index: NVML index to sample, or None for no GPU sampling.

    pss: also the tree's proportional set size. Reading it walks every page a process
    maps (about 0.1 s per GiB here, in the kernel, holding the process's memory map), so
    it is read at every sample only while the tree changes: when its set of processes
    differs from the last read's, when a process's resident size grew by more than
    :data:`PSS_GROWTH` since then, or ``pss_interval_s`` after the last read (None, the
    default: at every sample), and always at the window's first and last samples. In
    between, a sample's PSS is the last read's: a steady pool of several GiB is then read
    every ``pss_interval_s`` instead of every ``interval_s``, and a peak reached and left
    between two reads may be under the true one by up to :data:`PSS_GROWTH` of the
    processes' resident size (which counts shared pages in full, so it can be more than
    that share of their PSS).
    """

    def __init__(self, pids: Iterable[int] | None = None, interval_s: float = 0.1,
                 children: bool = True, gpu_index: int | None = 0, pss: bool = False,
                 pss_interval_s: float | None = None) -> None:
        for name, value in (("interval_s", interval_s), ("pss_interval_s", pss_interval_s)):
            if value is not None and not (isinstance(value, (int, float))
                                          and 0 <= value < math.inf):
                raise ValueError(f"{name}: expected seconds >= 0; got {value!r}")
        self.pids = list(pids) if pids is not None else [os.getpid()]
        self.interval_s, self.children, self.gpu_index = interval_s, children, gpu_index
        self.pss = pss
        self.pss_interval_s = pss_interval_s
        self.result: ResourceUsage | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def __enter__(self) -> "ResourceMonitor":
        self._start_wall, self._start_epoch = time.perf_counter(), time.time()
        self._first: dict[tuple[int, float], float] = {}
        self._last: dict[tuple[int, float], float] = {}
        self._peak_rss, self._samples, self._peak_pss = 0, 0, 0
        self._pss_by_name: dict[str, int] = {}
        self._pss_held: dict[tuple[int, float], tuple[int, int]] = {}  # key: (pss, rss)
        self._pss_read_at, self._pss_reads = -math.inf, 0
        self._gpu = _GpuSampler(self.gpu_index) if self.gpu_index is not None else None
        self._sample()
        self._thread = threading.Thread(target=self._run, name="ResourceMonitor", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> ResourceUsage:
        """End the window (idempotent) and return the :class:`ResourceUsage`."""
        if self.result is None:
            self._stop.set()
            self._thread.join()
            self._sample(final=True)
            self.result = self._summary(time.perf_counter() - self._start_wall)
            if self._gpu is not None:
                self._gpu.close()
        return self.result

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _processes(self) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        for pid in self.pids:
            try:
                root = psutil.Process(pid)
                found.append(root)
                if self.children:
                    found.extend(root.children(recursive=True))
            except psutil.Error:
                continue
        return found

    def _sample(self, final: bool = False) -> None:
        rss = 0
        seen: list[tuple[psutil.Process, tuple[int, float], str, int]] = []
        for proc in self._processes():
            try:
                with proc.oneshot():
                    times, mem = proc.cpu_times(), proc.memory_info()
                    key = (proc.pid, proc.create_time())
                    name = proc.name() if self.pss else ""
            except psutil.Error:
                continue
            cpu, rss = times.user + times.system, rss + mem.rss
            seen.append((proc, key, name, mem.rss))
            with self._lock:
                if key not in self._first:  # born during the window: all its CPU counts
                    self._first[key] = 0.0 if key[1] >= self._start_epoch else cpu
                self._last[key] = cpu
        pss = self._sample_pss(seen, final) if self.pss else 0
        if self._gpu is not None:
            self._gpu.sample()
        with self._lock:
            self._peak_rss, self._samples = max(self._peak_rss, rss), self._samples + 1
            self._peak_pss = max(self._peak_pss, pss)

    def _sample_pss(self, seen: list[tuple[psutil.Process, tuple[int, float], str, int]],
                    final: bool = False) -> int:
        """The tree's PSS now: read from every process when due (see the class) or at the
        window's last sample (``final``), else the last read's values."""
        held = self._pss_held
        now = time.perf_counter()
        due = (final or self.pss_interval_s is None
               or now - self._pss_read_at >= self.pss_interval_s
               or {key for _, key, _, _ in seen} != set(held)
               or any(rss > held[key][1] * (1 + PSS_GROWTH) for _, key, _, rss in seen))
        if not due:
            return sum(held[key][0] for _, key, _, _ in seen)
        fresh: dict[tuple[int, float], tuple[int, int]] = {}
        for proc, key, name, rss in seen:
            try:
                fresh[key] = (_pss(proc), rss)
            except psutil.Error:
                continue
            with self._lock:
                self._pss_by_name[name] = max(self._pss_by_name.get(name, 0), fresh[key][0])
        self._pss_held, self._pss_read_at, self._pss_reads = fresh, now, self._pss_reads + 1
        return sum(v[0] for v in fresh.values())

    def _summary(self, wall_s: float) -> ResourceUsage:
        cpu_s = sum(self._last[k] - self._first[k] for k in self._last)
        gpu = self._gpu.summary() if self._gpu is not None else GpuSample(False, "not sampled")
        return ResourceUsage(wall_s, cpu_s, cpu_s / wall_s if wall_s > 0 else math.nan,
                             self._peak_rss, len(self._last), self._samples, gpu,
                             self._peak_pss, dict(self._pss_by_name), self._pss_reads)


PSS_GROWTH = 0.05
"""A process whose resident size grew by more than this share since the last PSS read
has the tree's PSS read again at the next sample (:class:`ResourceMonitor`)."""


def memory_held(pids: Iterable[int]) -> int:
    """Bytes of memory ``pids`` hold together, each page counted once: the sum of their
    proportional set sizes (a page shared by k processes counts 1/k to each; Linux), or
    of their resident sizes where PSS is not reported. Processes that are gone count 0.

    >>> 0 < memory_held([os.getpid()]) <= psutil.Process().memory_info().rss
    True
    """
    total = 0
    for pid in pids:
        try:
            total += _pss(psutil.Process(pid))
        except psutil.Error:
            continue
    return total


def _pss(proc: psutil.Process) -> int:
    """One process's proportional set size (its resident size where PSS is not
    reported or not readable); raises psutil.Error when the process is gone."""
    try:
        return int(getattr(proc.memory_full_info(), "pss", proc.memory_info().rss))
    except psutil.AccessDenied:
        return int(proc.memory_info().rss)


def cpu_usage(pids: Iterable[int] | None = None, duration_s: float = 1.0,
              interval_s: float = 0.1, gpu_index: int | None = None) -> ResourceUsage:
    """Watch ``pids`` (default: this process) and their children for ``duration_s``.

    >>> cpu_usage(duration_s=0.05).cores_busy >= 0
    True
    """
    with ResourceMonitor(pids, interval_s, gpu_index=gpu_index) as monitor:
        time.sleep(duration_s)
    return monitor.result
