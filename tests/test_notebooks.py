"""Notebook house rules, and every notebook executed by papermill at its tiny parameters."""

import ast
import json

import nbformat
import papermill
import pytest

from workbench.reproduce import notebook_parameters, notebook_paths

NOTEBOOKS = notebook_paths()
CELL_TIMEOUT_S = 300  # a cell that hangs fails the test instead of holding CI
#: run by tests/test_notebooks_second.py: --dist loadfile gives a file to one worker, and
#: all the notebooks in one file (some 7 minutes) made the suite's tail wait for it. The
#: split balances the tiny runs measured before (05 34 s, 13 60 s, 18 24 s here; 08 36 s,
#: 09 61 s, 17 31 s there).
SECOND = ("02_", "04_", "05_", "06_", "10_", "12_", "13_", "16_", "18_")
HERE = [p for p in NOTEBOOKS if not p.name.startswith(SECOND)]
THERE = [p for p in NOTEBOOKS if p.name.startswith(SECOND)]


def test_there_are_notebooks():
    assert any(p.name == "01_quickstart.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_house_rules(path):
    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    assert papermill.inspect_notebook(str(path)), "papermill sees the parameters"
    for node in ast.parse(tagged[0].source).body:
        assert isinstance(node, ast.AnnAssign), f"parameters are typed literals: {ast.unparse(node)}"
        ast.literal_eval(node.value)
    for cell in nb.cells:
        if cell.cell_type == "code":
            tree = ast.parse(cell.source)
            assert not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                           for n in ast.walk(tree)), "no def/class in notebooks"
            assert not cell.get("outputs"), "commit notebooks without outputs"


@pytest.mark.parametrize("path", HERE, ids=lambda p: p.name)
def test_runs_at_tiny_parameters(path, tmp_path):
    run_at_tiny_parameters(path, tmp_path)


def run_at_tiny_parameters(path, tmp_path):
    """Execute ``path`` through papermill at its tiny parameters; it writes figures, each
    with its numbers, all named with its number."""
    params = notebook_parameters(path, "tiny")
    if "output_dir" in params:
        params["output_dir"] = str(tmp_path / "run")
    params["figures_dir"] = str(tmp_path / "figures")
    out = tmp_path / path.name
    papermill.execute_notebook(str(path), str(out), parameters=params, cwd=str(path.parent),
                               kernel_name="python3", progress_bar=False,
                               execution_timeout=CELL_TIMEOUT_S)
    executed = json.loads(out.read_text())
    assert executed["metadata"]["papermill"]["parameters"] == params
    written = list((tmp_path / "figures").glob("*.png"))
    assert written, "the notebook saved at least one figure"
    number = path.name.split("_")[0]
    for png in written:
        assert png.with_suffix(".json").exists(), f"{png.name} has its numbers beside it"
    files = sorted(f.name for f in (tmp_path / "figures").iterdir())
    assert [f for f in files if not f.startswith(number + "_")] == [], \
        f"every figure file of {path.name} carries its number"
