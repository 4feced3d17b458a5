"""The one config: derived values in one place, sections, overrides, and refusals."""

import pytest

from workbench.config import EvalConfig, PoolConfig, RankingConfig, SearchConfig, load_config

BASE = {"benchmark": "metaworld", "suite": "MT10", "policy": "expert"}


def test_the_batch_size_is_derived_in_one_place():
    assert [PoolConfig(w, r).batch for w, r in [(1, 1), (2, 1), (3, 2), (4, 2), (8, 1)]] == \
        [1, 2, 2, 2, 8]
    assert PoolConfig(4, 1, max_batch=2).batch == 2
    assert EvalConfig(**BASE, pool={"workers": 3, "replicas": 2}).pool.batch == 2


def test_the_backend_decides_the_default_observation_schedule():
    assert EvalConfig(**BASE).observe_every_step
    assert not EvalConfig(**BASE, backend="pool").observe_every_step
    assert EvalConfig(**BASE, backend="pool", observe="every_step").observe_every_step


def test_the_run_id_depends_on_what_decides_outcomes_only():
    config = EvalConfig(**BASE, episodes=2)
    faster = config.replace(backend="pool", pool={"workers": 4}, video=3, output_dir="x")
    assert faster.resolved_run_id() == config.resolved_run_id()
    assert config.replace(episodes=3).resolved_run_id() != config.resolved_run_id()
    assert config.replace(policy_options={"defect": "noise", "level": 0.1}).resolved_run_id() \
        != config.resolved_run_id()
    assert config.resolved_run_id().startswith("ScriptedExpert-MT10-")


def test_sections_from_mappings_shorthands_and_dotted_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("benchmark: metaworld\nsuite: MT10\npolicy: expert\nsearch: true\n"
                    "video: off\npool: {workers: 2}\n")
    config = load_config(path, {"pool.replicas": 2, "episodes": 4})
    assert config.search == SearchConfig(enabled=True) and config.video == "off"
    assert (config.pool.workers, config.pool.replicas, config.episodes) == (2, 2, 4)
    assert config.replace(pool={"max_wait_ms": 1}).pool == PoolConfig(2, 2, None, 1.0)
    assert config.search.pool_limits(cores=2) == (4, 2)


def test_a_policy_class_is_accepted_and_named_in_plain_data():
    from workbench.policies.zero import ZeroPolicy

    config = EvalConfig(**{**BASE, "policy": ZeroPolicy})
    assert config.to_dict()["policy"] == "workbench.policies.zero:ZeroPolicy"
    assert config.policy_factory().options == {"protocol": "metaworld-v1"}


@pytest.mark.parametrize("changes, message", [
    ({"colour": 1}, r"unknown key 'colour'"),
    ({"max_batch": 4}, r"unknown key 'max_batch' \(did you mean pool.max_batch\?\)"),
    ({"episodse": 4}, r"unknown key 'episodse' \(did you mean 'episodes'\?\)"),
])
def test_unknown_keys_are_refused_with_a_hint(changes, message):
    with pytest.raises(ValueError, match=message):
        EvalConfig.from_dict({**BASE, **changes})


def test_missing_required_keys_are_named():
    with pytest.raises(ValueError, match=r"missing required keys \['policy', 'suite'\]"):
        EvalConfig.from_dict({"benchmark": "metaworld"})


def test_the_ranking_section_validates_itself():
    assert RankingConfig(checkpoints=[10, 20], comparisons_per_pair=20).checkpoints == (10, 20)
    with pytest.raises(ValueError, match=r"ranking.checkpoints\[1\]: expected an integer >= 1 "
                                         r"and <= 20; got 40"):
        RankingConfig(checkpoints=[10, 40], comparisons_per_pair=20)
    with pytest.raises(ValueError, match="ranking.n_boot: expected an integer >= 1"):
        RankingConfig(n_boot="many")


def test_a_config_shows_in_a_notebook_what_differs_from_the_defaults():
    from html.parser import HTMLParser

    config = load_config(dict(benchmark="metaworld", suite="MT10", policy="expert",
                              episodes=3, pool={"workers": 3}, policy_options={"level": 0.0}))
    assert config.changed() == {"benchmark": "metaworld", "suite": "MT10", "policy": "expert",
                                "episodes": 3, "policy_options": {"level": 0.0},
                                "pool.workers": 3}

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.in_details = {"shown": [], "folded": []}, False

        def handle_starttag(self, tag, attrs):
            self.in_details |= tag == "details"

        def handle_data(self, data):
            if self.lasttag == "th":
                self.rows["folded" if self.in_details else "shown"].append(data)

    parsed = Rows()
    parsed.feed(config._repr_html_())
    assert parsed.rows["shown"] == list(config.changed())
    assert len(parsed.rows["folded"]) == 47 and "search.min_gain" in parsed.rows["folded"]
    assert config.resolved_run_id() in config._repr_html_()
