"""The profiling package: its public names, a light import, and the stage plot."""

import subprocess
import sys

import matplotlib
import pandas as pd

import workbench.profiling as profiling
from workbench.profiling import plot_stage_profile

matplotlib.use("Agg")


def test_every_public_name_imports():
    assert profiling.__all__
    for name in profiling.__all__:
        assert getattr(profiling, name) is not None


def test_import_is_light():
    code = ("import sys, workbench.profiling; "
            "print(any(m in sys.modules for m in ('mujoco', 'metaworld', 'torch', 'pynvml')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plot_stage_profile_bars_per_setting():
    df = pd.DataFrame({"stage": ["a", "b"] * 2, "wall_ms": [1.0, 2.0, 3.0, 4.0],
                       "batch_size": [1, 1, 8, 8]})
    fig, ax = plot_stage_profile(df)
    assert len(ax.patches) == 4 and ax.get_xlabel() == "wall_ms"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["batch_size=1", "batch_size=8"]
    _, same_ax = plot_stage_profile(df[df["batch_size"] == 1], ax=ax)
    assert same_ax is ax
