"""workbench.studies.scaling at a tiny size: each axis runs what it says (the episode
counts asked for, the same episodes along the workers and replicas axes), the searched
rows carry the search's seconds and share, and outcomes do not depend on the pool."""

import pytest

from workbench.studies.scaling import scaling_table

CONFIG = dict(benchmark="metaworld", suite="MT10", tasks=["reach-v3", "push-v3"], episodes=1,
              policy="expert-vision-cost", policy_options={"chunk_size": 8}, image_size=32,
              max_steps=12)


@pytest.fixture(scope="module")
def table():
    return scaling_table(CONFIG, [2, 4], [1, 2], [1, 2], search={"max_workers": 2,
                                                                  "max_replicas": 1})


def test_each_axis_runs_the_points_asked_for(table):
    assert list(zip(table["axis"], table["variant"], table["episodes"])) == [
        ("episodes", "fixed", 2), ("episodes", "searched", 2),
        ("episodes", "fixed", 4), ("episodes", "searched", 4),
        ("workers", "1 workers", 4), ("workers", "2 workers", 4),
        ("replicas", "1 replicas", 4), ("replicas", "2 replicas", 4)]
    assert list(table["workers"].iloc[4:]) == [1, 2, 2, 2]
    assert list(table["replicas"].iloc[4:]) == [1, 1, 1, 2]
    # one episode list per count: the same steps wherever it ran (12 each, the cap)
    assert set(table["steps"][table["episodes"] == 4]) == {48}
    assert (table["e2e_s"] > table["eval_s"]).all() and (table["eval_s"] > 0).all()


def test_the_searched_rows_carry_the_search_and_its_share(table):
    searched = table[table["variant"] == "searched"]
    assert (searched["search_s"] > 0).all() and (searched["chosen"] != "").all()
    assert list(searched["search_share"]) == pytest.approx(
        list(searched["search_s"] / searched["e2e_s"]))
    assert table[table["variant"] != "searched"]["search_s"].isna().all()
    # the expert's probes count (runtime-invariant): the warm span is the search's seconds
    # plus the chosen configuration's (workbench.studies.runtime.warm_span)
    assert (searched["eval_s"] > searched["search_s"]).all()


def test_outcomes_do_not_depend_on_the_pool(table):
    frames = table.attrs["results"]
    assert len(frames) == len(table)
    same = [f.set_index("episode_id")[["success", "steps"]].sort_index()
            for f, n in zip(frames, table["episodes"]) if n == 4]
    assert len(same) == 6 and all(f.equals(same[0]) for f in same)
