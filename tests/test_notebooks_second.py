"""The other half of the notebooks at their tiny parameters (tests/test_notebooks.py says
why there are two files)."""

import pytest

from test_notebooks import HERE, SECOND, THERE, run_at_tiny_parameters


def test_the_two_files_run_every_notebook_once():
    # each prefix names one notebook (a renamed one would otherwise move files unseen)
    assert len(THERE) == len(SECOND) and HERE and not set(HERE) & set(THERE)


@pytest.mark.parametrize("path", THERE, ids=lambda p: p.name)
def test_runs_at_tiny_parameters(path, tmp_path):
    run_at_tiny_parameters(path, tmp_path)
