"""The real-to-sim notebook runs under papermill and writes its figures with their numbers."""

import ast
import json
import pathlib

import nbformat
import pytest

from workbench.studies.paper_data import find_papers_dir

NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "10_ranking_real_to_sim.ipynb"
FIGURES = ("10_ranking_real_to_sim_metrics", "10_ranking_bt_scores_by_setting",
           "10_ranking_real_vs_sim_success", "10_ranking_real_sim_gaps")


def test_house_rules():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    for line in tagged[0].source.splitlines():
        assert ":" in line.split("=")[0] and "#" in line, f"untyped or uncommented: {line}"
    for cell in nb.cells:
        assert not cell.get("outputs"), "commit the notebook without outputs"
        if cell.cell_type == "code":
            tree = ast.parse(cell.source)
            assert not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.walk(tree))


def test_runs_and_writes_figures(tmp_path):
    papermill = pytest.importorskip("papermill")
    assert find_papers_dir().is_dir()  # the CSVs ship with the package: nothing to skip
    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(out), kernel_name="python3",
                               cwd=str(NOTEBOOK.parent), progress_bar=False,
                               parameters={"figures_dir": str(tmp_path / "figs")})
    executed = nbformat.read(out, as_version=4)
    assert executed.metadata.papermill.parameters["figures_dir"] == str(tmp_path / "figs")
    for name in FIGURES:
        assert (tmp_path / "figs" / f"{name}.png").stat().st_size > 5_000
        payload = json.loads((tmp_path / "figs" / f"{name}.json").read_text())
        assert "papers_dir" in payload["config"]
    metrics = (tmp_path / "figs" / "10_ranking_real_to_sim_metrics.csv").read_text()
    assert metrics.startswith("judge,rho,r,mmrv") and "Qwen3-VL-4B" in metrics
