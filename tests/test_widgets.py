import matplotlib

matplotlib.use("Agg")

from widgets import probe_panel  # noqa: E402
from workbench.runtime.experiments import make_workload  # noqa: E402


def test_probe_panel_runs_probes_and_keeps_history():
    workload = make_workload("MT10", ["reach-v3"], 1, "expert", image_size=32)
    panel = probe_panel(workload, max_workers=2, max_replicas=1)
    try:
        sliders, button = panel.children[0].children, panel.children[2].children[0]
        sliders[0].value = 1
        button.click()
        sliders[0].value = 2
        button.click()
        history = panel.session.history
        assert list(history["workers"]) == [1, 2]
        assert (history["steps_per_s"] > 0).all() and (history["successes"] == 1).all()
        assert "steps/s" in panel.children[2].children[1].value
    finally:
        panel.session.close()
