"""The ranking core imports alone: in a fresh interpreter, ``workbench.ranking`` and its
Bradley-Terry module load no runner, runtime, simulator or Ray module, and all its names
no plotting library and no study (the package's names load on first use)."""

import json
import subprocess
import sys

HEAVY = ("workbench.runtime", "workbench.runner", "ray", "mujoco", "metaworld")


def loaded_after(statement: str) -> list[str]:
    code = (f"import json, sys\n{statement}\n"
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout)


def test_the_ranking_core_loads_no_runner_simulator_or_ray():
    for statement in ("import workbench.ranking", "import workbench.ranking.bradley_terry",
                      "from workbench.ranking import fit_bradley_terry, bootstrap_bradley_terry"):
        heavy = [m for m in loaded_after(statement)
                 if any(m == h or m.startswith(h + ".") for h in HEAVY)]
        assert heavy == [], (statement, heavy)


def test_the_ranking_core_loads_no_plotting_library_and_no_study():
    modules = loaded_after("from workbench.ranking import *")
    assert "workbench.ranking.agreement" in modules  # every name was loaded
    banned = ("matplotlib", "seaborn", "workbench.studies", "workbench.reports", "torch")
    assert [m for m in modules if m.split(".")[0] in banned or m.startswith(banned)] == []


def test_a_name_of_a_package_loads_on_first_use():
    modules = loaded_after("from workbench.studies import table_one")
    assert "workbench.studies.action_replay_table" in modules  # the study, once asked for
    assert "workbench.studies.runtime" not in modules
