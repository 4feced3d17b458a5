"""The other half of the notebooks at their tiny parameters (tests/test_notebooks.py says
why there are two files)."""

import pytest

from test_notebooks import NOTEBOOKS, SECOND, run_at_tiny_parameters


def test_the_two_files_run_every_notebook_once():
    first = [p for p in NOTEBOOKS if not p.name.startswith(SECOND)]
    second = [p for p in NOTEBOOKS if p.name.startswith(SECOND)]
    assert len(second) == len(SECOND) and first and not set(first) & set(second)


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name.startswith(SECOND)],
                         ids=lambda p: p.name)
def test_runs_at_tiny_parameters(path, tmp_path):
    run_at_tiny_parameters(path, tmp_path)
