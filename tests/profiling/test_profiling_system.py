"""GPU and process-tree resource sampling."""

import math
import os
import subprocess
import sys
import time

import matplotlib
import pandas as pd

import workbench.profiling as profiling
from workbench.profiling import ResourceMonitor, cpu_usage, gpu_busy, gpu_status, plot_stage_profile

matplotlib.use("Agg")
SPIN_CPU_S = 1.0
SPIN = ("import time\n"
        f"while time.process_time() < {SPIN_CPU_S}: pass\n"
        "time.sleep(0.15)\n")


def test_every_public_name_imports():
    assert profiling.__all__
    for name in profiling.__all__:
        assert getattr(profiling, name) is not None


def test_import_is_light():
    code = ("import sys, workbench.profiling; "
            "print(any(m in sys.modules for m in ('mujoco', 'metaworld', 'torch', 'pynvml')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_gpu_is_unavailable_here_with_a_reason():
    sample = gpu_busy(duration_s=0.05, interval_s=0.01)
    if sample.available:  # a machine with a GPU: the numbers are percentages
        assert 0 <= sample.util_mean_pct <= 100 and sample.samples >= 1
        assert gpu_status() == "available"
        return
    assert sample.reason and math.isnan(sample.util_mean_pct) and sample.samples == 0
    assert gpu_status().startswith("unavailable: ")


def test_monitor_sees_a_busy_child_process():
    with ResourceMonitor(interval_s=0.05, gpu_index=0) as monitor:
        child = subprocess.Popen([sys.executable, "-c", SPIN])
        child.wait()
    usage = monitor.result
    assert usage.cpu_s >= 0.8 * SPIN_CPU_S, usage
    assert usage.cores_busy > 0.5, usage
    assert usage.processes >= 2 and usage.peak_rss_bytes > 10_000_000
    assert usage.gpu.available or usage.gpu.reason
    assert set(usage.to_dict()) >= {"cores_busy", "peak_rss_bytes", "gpu_util_mean_pct"}


def test_monitor_by_pid_and_idle_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.6)"])
    try:
        usage = cpu_usage([child.pid], duration_s=0.3, interval_s=0.05)
    finally:
        child.wait()
    assert usage.cores_busy < 0.5 and usage.processes == 1 and usage.samples >= 3
    assert usage.gpu.reason == "not sampled"


def test_monitor_stop_is_idempotent():
    monitor = ResourceMonitor([os.getpid()], gpu_index=None)
    with monitor:
        time.sleep(0.02)
    assert monitor.stop() is monitor.result


def test_plot_stage_profile_bars_per_setting():
    df = pd.DataFrame({"stage": ["a", "b"] * 2, "wall_ms": [1.0, 2.0, 3.0, 4.0],
                       "batch_size": [1, 1, 8, 8]})
    fig, ax = plot_stage_profile(df)
    assert len(ax.patches) == 4 and ax.get_xlabel() == "wall_ms"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["batch_size=1", "batch_size=8"]
    _, same_ax = plot_stage_profile(df[df["batch_size"] == 1], ax=ax)
    assert same_ax is ax
