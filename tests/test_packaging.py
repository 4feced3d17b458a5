"""`workbench reproduce` from an installed wheel, run from a folder outside the checkout.

The wheel is built without build isolation and installed with --no-deps into a fresh
venv that sees the test environment's packages (its site-packages added as a plain
path, so the checkout's editable install does not shadow the wheel).
"""

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def sh(*args, **kw):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=900, **kw)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_reproduce_runs_from_an_installed_wheel(tmp_path):
    wheels, venv, work = tmp_path / "wheels", tmp_path / "venv", tmp_path / "elsewhere"
    source = tmp_path / "source"  # a copy: building writes build/ and egg-info beside it
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", "runs", "out", "build", "figures", "__pycache__", "*.egg-info"))
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
       "--disable-pip-version-check", "-w", wheels, source)
    (wheel,) = wheels.glob("robo_workbench-*.whl")
    sh(sys.executable, "-m", "venv", venv)
    site = Path(sh(venv / "bin" / "python", "-c",
                   "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    sh(venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--quiet",
       "--disable-pip-version-check", wheel)
    work.mkdir()
    where = sh(venv / "bin" / "python", "-c", "import workbench; print(workbench.__file__)",
               cwd=work).stdout.strip()
    assert where.startswith(str(venv)), where  # the wheel, not the checkout
    proc = sh(venv / "bin" / "workbench", "reproduce", "--quick", "--notebooks",
              "01_quickstart.ipynb", "10_ranking_real_to_sim.ipynb", cwd=work)
    assert "01_quickstart.ipynb" in proc.stdout and "failed" not in proc.stdout
    assert "Traceback" not in proc.stderr and "WARNING" not in proc.stderr
    figures = work / "figures"
    assert (figures / "01_quickstart_success.png").exists()
    assert (figures / "10_ranking_real_to_sim_metrics.csv").exists()  # its CSVs shipped too
    executed = json.loads((work / "out" / "notebooks" / "01_quickstart.ipynb").read_text())
    kernel = executed["metadata"]["papermill"]
    assert kernel["parameters"]["output_dir"] == "../runs/quickstart-tiny"
    assert (work / "out" / "runs" / "quickstart-tiny" / "records.sqlite").exists()
