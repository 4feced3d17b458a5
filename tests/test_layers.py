"""The architecture holds: one-way layers (import-linter) and one step loop."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "workbench"


def test_import_linter_layers_contract_is_kept():
    # in a process of its own: simulators imported by earlier tests (dm_control's absl
    # logging) may hold the test process's streams
    proc = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout


def test_every_package_and_top_module_of_the_workbench_sits_in_a_layer():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    modules = {f"workbench.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    packages = {f"workbench.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert modules | packages <= layered, sorted((modules | packages) - layered)


def _step_calls():
    """(module, receiver) of every ``<receiver>.step(...)`` call in the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "step"):
                yield str(path.relative_to(REPO)), ast.unparse(node.func.value)


def test_exactly_one_module_steps_an_adapter():
    calls = set(_step_calls())
    on_adapters = {module for module, receiver in calls if "adapter" in receiver}
    # the step loop evaluates; the public checker (as Gymnasium's env_checker) steps an
    # adapter only to check its contract and records nothing
    assert on_adapters == {"workbench/runtime/episode.py", "workbench/checks.py"}, calls
    # every other .step( is on something that is not an adapter: a benchmark's own
    # environment inside its adapter module, and an optimizer
    # (and a scripted policy's private simulation of its own plan)
    private = {(m, r) for m, r in calls if m.startswith("workbench/policies/")}
    assert all(r == "physics" for _, r in private), private
    elsewhere = {(m, r) for m, r in calls
                 if not m.startswith(("workbench/benchmarks/", "workbench/policies/"))}
    assert elsewhere == {("workbench/runtime/episode.py", "self.adapter"),
                         ("workbench/checks.py", "adapter"),
                         ("workbench/studies/training.py", "opt"),
                         ("workbench/studies/candidates.py", "opt")}, calls
    in_adapters = {r for m, r in calls if m.startswith("workbench/benchmarks/")}
    assert in_adapters and all(r.split(".")[-1] in ("_env", "env", "physics", "scene")
                               for r in in_adapters), in_adapters


def test_every_backend_name_has_one_executor():
    from workbench.config import BACKENDS
    from workbench.runner import EXECUTORS

    assert tuple(EXECUTORS) == BACKENDS
