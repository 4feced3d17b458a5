import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from widgets import probe_panel  # noqa: E402
from workbench.config import PoolConfig  # noqa: E402

CONFIG = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=1,
              policy="expert", image_size=32)
SEARCHED = pd.DataFrame([{"probe": 0, "workers": 1, "replicas": 1, "max_batch": 1,
                          "steps_per_s": 30.0, "busy_cores": 1.0, "peak_mem_gib": 0.7,
                          "status": "ok"}])


def test_probe_panel_runs_probes_and_keeps_history():
    panel = probe_panel(CONFIG, max_workers=2, max_replicas=1)
    try:
        sliders, button = panel.children[0].children, panel.children[2].children[0]
        sliders[0].value = 1
        button.click()
        sliders[0].value = 2
        button.click()
        history = panel.session.history
        assert list(history["workers"]) == [1, 2] and list(history["source"]) == ["manual"] * 2
        assert (history["steps_per_s"] > 0).all() and (history["successes"] == 1).all()
        assert "steps/s" in panel.children[2].children[1].value
        assert bytes(panel.children[3].value).startswith(b"\x89PNG")
    finally:
        panel.session.close()


def test_probe_panel_starts_from_a_search_and_plots_beside_its_probes():
    panel = probe_panel(CONFIG, max_workers=2, max_replicas=1, history=SEARCHED,
                        start=PoolConfig(2, 1, max_wait_ms=7.5))
    try:
        workers, replicas = panel.children[0].children
        batch, wait = panel.children[1].children
        assert (workers.value, replicas.value, batch.value, wait.value) == (2, 1, 2, 7.5)
        seeded = bytes(panel.children[3].value)
        assert seeded.startswith(b"\x89PNG")  # the search's probes are plotted already
        panel.children[2].children[0].click()
        after = bytes(panel.children[3].value)
        assert after.startswith(b"\x89PNG") and after != seeded
        history = panel.session.history
        assert list(history["source"]) == ["search", "manual"]
        assert history.iloc[1]["workers"] == 2 and history.iloc[1]["probe"] == 1
    finally:
        panel.session.close()
