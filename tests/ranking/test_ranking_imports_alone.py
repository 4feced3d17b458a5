"""The ranking core imports alone: in a fresh interpreter, ``workbench.ranking`` and its
Bradley-Terry module load no runner, runtime, simulator or Ray module (the package's
names load on first use)."""

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


def test_a_name_of_the_package_still_loads_on_first_use():
    modules = loaded_after("from workbench.ranking import table_one")
    assert "workbench.ranking.action_replay" in modules  # the study, once asked for
