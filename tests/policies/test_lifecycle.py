import numpy as np
import pytest

from workbench.contracts import Capabilities, EpisodeContext, LoadContext
from workbench.policies import LifecycleError, State, make_policy
from workbench.policies.zero import ZeroPolicy

CTX = EpisodeContext("e0", "reach-v3", "reach", seed=1)


def loaded():
    p = ZeroPolicy("metaworld-v1")
    p.load(LoadContext("metaworld-v1"))
    return p


def test_full_lifecycle_moves_through_every_state():
    p = ZeroPolicy("metaworld-v1")
    assert p.state is State.CREATED
    p.load(LoadContext("metaworld-v1"))
    assert p.state is State.LOADED
    p.reset(CTX)
    assert p.state is State.EPISODE_ACTIVE
    assert p.act({"episode_id": "e0"}).shape == (4,)
    p.end_episode("e0")
    assert p.state is State.LOADED
    p.unload()
    assert p.state is State.RELEASED


@pytest.mark.parametrize("call, state", [
    (lambda p: p.reset(CTX), "Created"),
    (lambda p: p.act({"episode_id": "e0"}), "Created"),
    (lambda p: p.end_episode("e0"), "Created"),
    (lambda p: p.unload(), "Created"),
])
def test_calls_before_load_name_the_state(call, state):
    with pytest.raises(LifecycleError, match=f"policy state is {state}"):
        call(ZeroPolicy("metaworld-v1"))


def test_act_without_reset_and_double_load_and_unload_with_active_episode():
    p = loaded()
    with pytest.raises(LifecycleError, match="needs an active episode 'e0'; policy state is Loaded"):
        p.act({"episode_id": "e0"})
    with pytest.raises(LifecycleError, match="load\\(\\) needs state Created; policy state is Loaded"):
        p.load(LoadContext("metaworld-v1"))
    p.reset(CTX)
    with pytest.raises(LifecycleError, match="unload\\(\\) needs state Loaded; policy state is Episode active"):
        p.unload()
    with pytest.raises(LifecycleError, match="already active"):
        p.reset(CTX)
    with pytest.raises(LifecycleError, match="'other' is not active"):
        p.end_episode("other")


def test_released_policy_refuses_everything():
    p = loaded()
    p.unload()
    for call in (lambda: p.reset(CTX), lambda: p.load(LoadContext("metaworld-v1")), p.unload):
        with pytest.raises(LifecycleError, match="policy state is Released"):
            call()


def test_act_batch_serves_several_episodes_and_tracks_state():
    p = loaded()
    for i in range(3):
        p.reset(EpisodeContext(f"e{i}", "reach-v3", "reach", seed=i))
    out = p.act_batch([{"episode_id": f"e{i}"} for i in range(3)])
    assert len(out) == 3 and all(a.shape == (4,) for a in out)
    p.end_episode("e0"), p.end_episode("e1")
    assert p.state is State.EPISODE_ACTIVE
    p.end_episode("e2")
    assert p.state is State.LOADED


def test_capabilities_are_validated_and_registry_refuses_unknown_names():
    with pytest.raises(ValueError, match="chunk_size"):
        Capabilities("metaworld-v1", ("state",), chunk_size=0)
    with pytest.raises(ValueError, match="unknown policy 'nope'; registered: \\['aloha-scripted', 'expert'"):
        make_policy("nope")
    with pytest.raises(ValueError, match="policy_options \\{'wings': 2\\} do not fit "
                                         "ScriptedExpert"):
        make_policy("expert", wings=2)


def test_a_policy_asking_for_a_protocol_gets_the_benchmarks_unless_given():
    assert make_policy("zero", protocol="calvin-v1").capabilities.action_protocol == "calvin-v1"
    assert make_policy("vision", protocol="libero-v1").action_dim == 7
    assert make_policy("expert", protocol="libero-v1").capabilities.action_protocol == \
        "metaworld-v1"  # the expert takes no protocol: it speaks MetaWorld's
    with pytest.raises(ValueError, match="VisionPolicy needs protocol"):
        make_policy("vision")
    with pytest.raises(ValueError, match="trained for protocol 'metaworld-v1', not 'libero-v1'"):
        make_policy("vision", weights="bc", protocol="libero-v1").capabilities


def test_vision_policy_batches_natively_and_emits_valid_chunks():
    p = make_policy("vision", protocol="metaworld-v1", chunk_size=4, threads=1)
    caps = p.load(LoadContext("metaworld-v1"))
    assert caps.native_batching and caps.chunk_size == 4
    obs = []
    for i in range(3):
        p.reset(EpisodeContext(f"e{i}", "reach-v3", "reach the goal", seed=i))
        obs.append({"episode_id": f"e{i}", "images.primary": np.full((32, 32, 3), i, np.uint8),
                    "images.wrist": np.zeros((32, 32, 3), np.uint8),
                    "state": np.zeros(4, np.float32), "instruction": "reach the goal"})
    batch = p.act_batch(obs)
    single = [p.act(o) for o in obs]
    for b, s in zip(batch, single):
        assert b.shape == (4, 4) and b.dtype == np.float32 and np.all(np.abs(b) <= 1)
        np.testing.assert_allclose(b, s, atol=1e-5)
