"""`workbench reproduce` as a newcomer sees it: one progress bar, no third-party noise on
the terminal, the failing cell and its error kept, and a closing table."""

import os
import re
import subprocess
import sys

import nbformat


def notebook(path, *cells):
    nb = nbformat.v4.new_notebook(metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    params = nbformat.v4.new_code_cell('figures_dir: str = "figures"  # where figures go')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *[nbformat.v4.new_code_cell(c) for c in cells]]
    nbformat.write(nb, path)


def test_reproduce_keeps_the_failure_and_the_noise_out_of_the_terminal(tmp_path):
    home = tmp_path / "home"
    (home / "notebooks").mkdir(parents=True)
    (home / "experiments" / "tiny").mkdir(parents=True)
    notebook(home / "notebooks" / "a_ok.ipynb",
             "import os, warnings\nos.write(2, b'kernel noise on fd 2\\n')\n"
             "warnings.warn('third-party warning')",
             "from pathlib import Path\nPath(figures_dir, 'a.png').write_bytes(b'png')")
    notebook(home / "notebooks" / "b_fails.ipynb", "x = 1", "1 / 0")
    env = dict(os.environ, WORKBENCH_HOME=str(home))
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "reproduce", "--quick"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1  # one notebook failed
    lines = proc.stdout.splitlines()
    ok = next(line for line in lines if line.startswith(" a_ok.ipynb") or "a_ok" in line)
    failed = next(line for line in lines if "b_fails" in line)
    assert " ok " in f" {ok} " and ok.split()[-1] == "1"  # one figure written
    assert re.search(r"failed: cell \d+: ZeroDivisionError: division by zero", failed)
    assert "figures and the numbers behind them:" in proc.stdout
    assert "notebooks: 100%" in proc.stderr  # the progress bar
    for noise in ("kernel noise", "third-party warning", "WARNING", "Traceback"):
        assert noise not in proc.stderr, proc.stderr
    log = (tmp_path / "out" / "notebooks" / "a_ok.log").read_text()
    assert "kernel noise on fd 2" in log
    assert (tmp_path / "out" / "notebooks" / "b_fails.ipynb").exists()  # kept to inspect
