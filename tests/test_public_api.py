import importlib
import subprocess
import sys

import pytest

PACKAGES = ["workbench", "workbench.benchmarks", "workbench.policies", "workbench.records",
            "workbench.reports", "workbench.profiling", "workbench.ranking"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_imports(package):
    module = importlib.import_module(package)
    assert module.__all__
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_import_is_light():
    code = "import sys, workbench, workbench.benchmarks, workbench.policies; " \
           "print(any(m in sys.modules for m in ('mujoco', 'metaworld', 'torch')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
