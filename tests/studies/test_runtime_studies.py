"""The runtime studies behind notebook 06: the search table keeps its times apart."""

import workbench  # noqa: F401  (headless rendering chosen by the runner)
from workbench.studies import search_table

CONFIG = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3"], episodes=10,
              policy="expert", image_size=32,
              search={"enabled": True, "probe_episodes": 2, "max_workers": 2, "max_replicas": 1})


def test_the_chosen_row_keeps_search_setup_and_evaluation_apart():
    search, chosen = search_table(CONFIG)
    row = chosen.iloc[0]
    at = list(chosen.columns).index("search_s")
    assert list(chosen.columns)[at:at + 4] == ["search_s", "setup_s", "eval_s", "e2e_s"]
    assert row["search_s"] == search.search_s > 0
    assert row["setup_s"] >= 0 and row["eval_s"] > 0
    # apart: counted once each (set-up once held the search's seconds too, and overran)
    assert row["search_s"] + row["setup_s"] + row["eval_s"] <= row["e2e_s"]
    assert row["probe_episodes_recorded"] + row["episodes"] == 10
    assert row["episodes"] > 0, "the chosen configuration ran what the probes left"
