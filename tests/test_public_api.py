import importlib
import subprocess
import sys

import pytest

PACKAGES = ["workbench", "workbench.contracts", "workbench.benchmarks", "workbench.policies",
            "workbench.records", "workbench.reports", "workbench.profiling",
            "workbench.ranking", "workbench.studies"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_imports(package):
    module = importlib.import_module(package)
    assert module.__all__
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_import_and_config_validation_are_light():
    code = ("import sys, workbench, workbench.benchmarks, workbench.policies, workbench.config; "
            "workbench.load_config({'benchmark': 'metaworld', 'suite': 'MT10', 'policy': 'expert'});"
            "print(sorted(m for m in ('mujoco', 'metaworld', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_the_metaworld_adapter_sets_no_rendering_backend():
    code = ("import os; os.environ.pop('MUJOCO_GL', None); "
            "import workbench.benchmarks.metaworld; print(os.environ.get('MUJOCO_GL'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"
