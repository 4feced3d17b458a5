"""Every public name listed in ``__all__`` imports, and no module defines a huge function."""

import ast
import pathlib

import pytest

import workbench.ranking
import workbench.ranking.judges

MAX_FUNCTION_LINES = 60


@pytest.mark.parametrize("module", [workbench.ranking, workbench.ranking.judges])
def test_all_names_import(module):
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_functions_stay_small():
    root = pathlib.Path(workbench.ranking.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                assert length <= MAX_FUNCTION_LINES, f"{path.name}:{node.name} has {length} lines"
