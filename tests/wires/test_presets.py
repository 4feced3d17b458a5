"""Observation presets against the ecosystems' own preprocessing, both ways, and the
refusals a server answers with (one line naming the key)."""

import numpy as np
import pytest

from workbench.contracts.protocols import ContractError
from workbench.wires import PRESETS, get_preset, preset_from_keys
from workbench.wires.presets import Field

image_tools = pytest.importorskip("openpi_client.image_tools")
RNG = np.random.default_rng(0)


def frame(height, width):
    return RNG.integers(0, 256, (height, width, 3), dtype=np.uint8)


def openpi_preprocess(image):
    """What openpi's examples do to a frame (LIBERO after its 180-degree turn)."""
    return image_tools.convert_to_uint8(image_tools.resize_with_pad(image, 224, 224))


@pytest.mark.parametrize("shape", [(256, 256, 3), (480, 640, 3), (200, 300, 3), (97, 31, 3)])
def test_resize_with_pad_is_openpi_clients_own_pixel_for_pixel(shape):
    image = frame(*shape[:2])
    sent = get_preset("openpi/libero").fields[0].send(image)
    assert sent.dtype == np.uint8 and sent.shape == (224, 224, 3)
    np.testing.assert_array_equal(sent, openpi_preprocess(image))


def test_the_libero_preset_builds_the_element_openpis_libero_example_builds():
    observation = {"images.primary": frame(256, 256), "images.wrist": frame(256, 256),
                   "state.eef8": np.arange(8, dtype=np.float32) / 10,
                   "instruction": "put the bowl on the plate"}
    request = get_preset("openpi/libero").request(observation)
    assert sorted(request) == ["observation/image", "observation/state",
                               "observation/wrist_image", "prompt"]
    np.testing.assert_array_equal(request["observation/image"],
                                  openpi_preprocess(observation["images.primary"]))
    np.testing.assert_array_equal(request["observation/wrist_image"],
                                  openpi_preprocess(observation["images.wrist"]))
    assert request["observation/state"].dtype == np.float64
    np.testing.assert_array_equal(request["observation/state"], observation["state.eef8"])
    assert request["prompt"] == "put the bowl on the plate"


def test_the_aloha_preset_sends_the_top_camera_channels_first_as_openpis_aloha_sim():
    top = frame(480, 640)
    request = get_preset("openpi/aloha").request(
        {"images.head": top, "state": np.linspace(-1, 1, 14).astype(np.float32)})
    expected = np.transpose(openpi_preprocess(top), (2, 0, 1))
    np.testing.assert_array_equal(request["images"]["cam_high"], expected)
    assert request["state"].dtype == np.float64 and request["state"].shape == (14,)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_reads_back_what_it_sends(name):
    preset = get_preset(name)
    protocol = preset.protocols[0]
    size = preset.image_size or 64
    observation = {}
    for field in preset.fields:
        if field.dtype == "str":
            observation[field.feature] = "do the task"
        elif field.feature.startswith("images."):
            observation[field.feature] = frame(size * 3 // 4 if name == "openpi/aloha" else size,
                                               size)
        else:
            observation[field.feature] = RNG.normal(size=field.shape).astype(np.float32)
    back = preset.observation(preset.request(observation), protocol)
    assert sorted(back) == sorted(preset.features)
    for feature, value in back.items():
        if isinstance(value, str):
            assert value == "do the task"
        elif feature.startswith("images."):
            assert value.dtype == np.uint8 and value.ndim == 3 and value.shape[2] == 3
        else:
            assert value.dtype == np.float32
            np.testing.assert_array_equal(value, observation[feature])


GOOD = {"observation/image": np.zeros((224, 224, 3), np.uint8),
        "observation/wrist_image": np.zeros((224, 224, 3), np.uint8),
        "observation/state": np.zeros(8), "prompt": "go"}
REFUSALS = [
    ("a key missing", {k: v for k, v in GOOD.items() if k != "observation/wrist_image"},
     "observation/wrist_image: missing; preset openpi/libero expects observation/image uint8 "
     "(224, 224, 3), observation/wrist_image uint8 (224, 224, 3), observation/state "
     "float64 (8,), prompt str"),
    ("float images", GOOD | {"observation/image": np.zeros((224, 224, 3), np.float32)},
     "observation/image: expected uint8 (224, 224, 3); got float32 (224, 224, 3)"),
    ("wrong size", GOOD | {"observation/image": np.zeros((256, 256, 3), np.uint8)},
     "observation/image: expected uint8 (224, 224, 3); got uint8 (256, 256, 3)"),
    ("a short state", GOOD | {"observation/state": np.zeros(7)},
     "observation/state: expected float64 (8,); got float64 (7,)"),
    ("a list state", GOOD | {"observation/state": [0.0] * 8},
     "observation/state: expected an array float64 (8,); got list"),
    ("a bytes prompt", GOOD | {"prompt": b"go"}, "prompt: expected a string; got bytes"),
    ("not a map", [GOOD], "a request: expected a map; got list"),
]


@pytest.mark.parametrize("what, request_, message", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_request_that_does_not_fit_is_refused_naming_the_key(what, request_, message):
    with pytest.raises(ContractError) as refused:
        get_preset("openpi/libero").observation(request_, "libero-v1")
    assert str(refused.value) == message


def test_a_float32_state_is_read_as_the_float64_openpi_sends_would_be():
    read = get_preset("openpi/libero").observation(
        GOOD | {"observation/state": np.ones(8, np.float32)}, "libero-v1")
    assert read["state.eef8"].dtype == np.float32 and read["state.eef8"].tolist() == [1.0] * 8


def test_a_preset_refuses_another_protocol_and_unknown_names():
    with pytest.raises(ContractError, match="preset 'openpi/libero' is for"):
        get_preset("openpi/libero").observation(GOOD, "metaworld-v1")
    with pytest.raises(ValueError, match=r"unknown preset 'openpi/kitchen'; available: \["):
        get_preset("openpi/kitchen")


KEYMAP_REFUSALS = [
    ([1, 2], "keys: expected a map of their keys to features; got list"),
    ({"": "state"}, "keys: keys: expected non-empty strings; got ''"),
    ({"img": 3}, "keys['img']: expected a feature name; got 3"),
    ({"img": "images.nope"}, "keys['img']: "),
    ({"obs": {"x": "stat"}}, "keys['obs']['x']: "),
    ({}, "keys: map at least one key to a feature"),
]


@pytest.mark.parametrize("keys, message", KEYMAP_REFUSALS)
def test_a_user_key_map_is_validated_like_every_config_key(keys, message):
    with pytest.raises(ValueError) as refused:
        preset_from_keys("openpi", "metaworld-v1", keys)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_a_user_key_map_nests_and_sends_values_as_the_workbench_holds_them():
    preset = preset_from_keys("vla-eval", "metaworld-v1",
                              {"pixels": {"main": "images.primary"}, "proprio": "state"})
    state = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    request = preset.request({"images.primary": frame(32, 32), "state": state})
    assert sorted(request) == ["pixels", "proprio"]
    assert request["pixels"]["main"].shape == (32, 32, 3)
    assert request["proprio"].dtype == np.float32
    assert [f.shown for f in preset.fields] == ["pixels['main']", "proprio"]
    assert Field(("a", "b"), "state", "float32", (4,)).spec == "float32 (4,)"
