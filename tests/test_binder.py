"""Binder installs what the notebooks import: every top-level module a notebook imports
is the standard library's, the checkout's own, or provided by a distribution that
binder's ``postBuild`` installs (the package's dependencies and the extras it names,
followed through their own requirements, as installed here)."""

import ast
import json
import re
import sys
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
OWN = {"workbench", "widgets"}
OUTSIDE = {"chaos", "families", "my_policies"}  # the checkout's perf/ scripts, put on sys.path


def notebook_imports(path: Path) -> set[str]:
    names = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        source = "\n".join(line for line in source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def binder_distributions() -> set[str]:
    """The distributions postBuild's install brings: the project's requirements with the
    extras it names, and theirs, transitively (as installed in this environment)."""
    post = (ROOT / "binder" / "postBuild").read_text()
    found = re.search(r'-e "?\.(?:\[([\w,]+)\])?"?', post)
    assert found, "postBuild installs the checkout with pip install -e ."
    extras = set((found.group(1) or "").split(",")) - {""}
    todo = [(r, extras) for r in requires("robo-workbench")]
    todo += [("ipykernel", set())]  # postBuild's kernel install
    seen: set[str] = set()
    while todo:
        text, chosen = todo.pop()
        req = Requirement(text)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in chosen | {""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += [(r, set(req.extras)) for r in requires(req.name) or []]
        except PackageNotFoundError:
            pass
    return seen


def test_every_notebook_import_is_installed_by_binder():
    provided = binder_distributions() | {"pytorch-cpu"}
    providers = packages_distributions()
    missing = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for module in notebook_imports(path) - OWN - OUTSIDE:
            if module in sys.stdlib_module_names:
                continue
            dists = {canonicalize_name(d) for d in providers.get(module, [])}
            if module == "torch":
                dists.add("pytorch-cpu")  # binder's environment.yml installs it
            if not dists & provided:
                missing.setdefault(path.name, []).append(module)
    assert missing == {}, missing


def test_the_check_sees_the_extras_the_notebooks_need():
    provided = binder_distributions()
    assert {"ray", "rpent-libero", "gymnasium-robotics"} <= provided
