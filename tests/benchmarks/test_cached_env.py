"""CachedEnvAdapter, the environment cache the adapters share: one environment per task
built on first use and kept, every renderer and environment released by close()."""

import pytest

from workbench.benchmarks.base import CachedEnvAdapter
from workbench.benchmarks.metaworld import MetaWorldAdapter
from workbench.contracts import EpisodeSpec


class Env:
    def __init__(self, task):
        self.task, self.closed = task, False

    def close(self):
        self.closed = True


class Table(CachedEnvAdapter):
    def __init__(self):
        self._init_envs()
        self.built = []

    def _build(self, task):
        self.built.append(task)
        return Env(task)


def test_each_task_is_built_once_and_close_releases_everything():
    table = Table()
    first = table._environment("a")
    assert table._environment("a") is first and table.built == ["a"]
    table._environment("b")
    renderers = {"a": Env("renderer"), "b": (Env("renderer"), "camera")}
    table._renderers.update(renderers)
    table.close()
    assert first.closed and all(e.closed for e in (renderers["a"], renderers["b"][0]))
    assert table._envs == {} and table._renderers == {} and table._env is None
    assert table._environment("a") is not first and table.built == ["a", "b", "a"]


def test_an_adapter_without_a_builder_says_so():
    class Bare(CachedEnvAdapter):
        pass

    bare = Bare()
    bare._init_envs()
    with pytest.raises(NotImplementedError, match="Bare builds no environment"):
        bare._environment("x")


def test_metaworld_keeps_its_environment_across_episodes_and_frees_it_on_close():
    adapter = MetaWorldAdapter("MT1:reach-v3", image_size=32)
    adapter.reset(EpisodeSpec("metaworld", "MT1:reach-v3", "reach-v3", 0, 0))
    env = adapter._environment("reach-v3")
    adapter.observe(["images.primary"])
    adapter.reset(EpisodeSpec("metaworld", "MT1:reach-v3", "reach-v3", 1, 1))
    assert adapter._environment("reach-v3") is env and len(adapter._renderers) == 1
    adapter.close()
    assert adapter._envs == {} and adapter._renderers == {} and adapter._env is None
