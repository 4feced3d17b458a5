"""Each wire's codec against the other side's own: frames we write are read by
openpi-client's msgpack_numpy and vla-eval's protocol module, and theirs by us; hostile
frames are refused in one line."""

import msgpack
import numpy as np
import pytest

from workbench.contracts.wire import WireError
from workbench.wires import openpi, vla_eval

msgpack_numpy = pytest.importorskip("openpi_client.msgpack_numpy")
messages = pytest.importorskip("vla_eval.protocol.messages")
numpy_codec = pytest.importorskip("vla_eval.protocol.numpy_codec")

IMAGE = np.random.default_rng(1).integers(0, 256, (24, 32, 3), dtype=np.uint8)
STATE = np.linspace(-1, 1, 8)


def test_openpi_frames_are_msgpack_numpy_both_ways():
    ours = openpi.encode({"observation/image": IMAGE, "observation/state": STATE, "prompt": "p",
                          "step": np.int64(3)})
    theirs = msgpack_numpy.unpackb(ours)
    np.testing.assert_array_equal(theirs["observation/image"], IMAGE)
    assert theirs["observation/state"].dtype == np.float64 and theirs["step"] == 3
    back = openpi.decode(msgpack_numpy.packb({"actions": np.ones((5, 7), np.float32),
                                              "server_timing": {"infer_ms": 1.0}}))
    assert openpi.read_actions(back).shape == (5, 7)


@pytest.mark.parametrize("image_format", ["png", "raw"])
def test_vla_eval_envelopes_are_vla_evals_own_both_ways(image_format):
    payload = {"images": {"agentview": IMAGE}, "states": STATE, "task_description": "t"}
    theirs = messages.unpack_message(vla_eval.encode(vla_eval.envelope("observation", payload, 7),
                                                     image_format))
    assert theirs.type == messages.MessageType.OBSERVATION and theirs.seq == 7
    np.testing.assert_array_equal(theirs.payload["images"]["agentview"], IMAGE)
    np.testing.assert_array_equal(theirs.payload["states"], STATE)
    for fmt in ("png", "raw"):
        numpy_codec.set_image_format(fmt)
        try:
            frame = messages.pack_message(messages.Message(messages.MessageType.OBSERVATION,
                                                           payload, seq=9))
        finally:
            numpy_codec.set_image_format("png")
        ours = vla_eval.decode(frame)
        assert ours["type"] == "observation" and ours["seq"] == 9
        np.testing.assert_array_equal(ours["payload"]["images"]["agentview"], IMAGE)
        np.testing.assert_array_equal(ours["payload"]["states"], STATE)


def test_an_action_reply_reads_as_vla_evals_runner_reads_it():
    frame = vla_eval.encode(vla_eval.envelope("action", {"actions": np.arange(4, dtype=np.float32)},
                                              2))
    theirs = messages.unpack_message(frame)
    assert theirs.type == messages.MessageType.ACTION
    assert theirs.payload["actions"].tolist() == [0.0, 1.0, 2.0, 3.0]


def image_frame(**image):
    return msgpack.packb({"type": "observation", "seq": 1, "timestamp": 0.0,
                          "payload": {"img": {"__image__": True, **image}}}, use_bin_type=True)


HOSTILE = [
    ("text", "hello", "expected a binary msgpack frame; got text"),
    ("garbage", b"\xc1\x00garbage", "not msgpack"),
    ("a list", msgpack.packb([1, 2]), "a message: expected a map; got list"),
    ("no type", msgpack.packb({"payload": {}, "seq": 1, "timestamp": 0}), "missing ['type']"),
    ("unknown type", msgpack.packb({"type": "x", "payload": {}, "seq": 1, "timestamp": 0}),
     "unknown message type 'x'"),
    ("payload a list", msgpack.packb({"type": "hello", "payload": [], "seq": 1, "timestamp": 0}),
     "payload: expected a map; got list"),
    ("seq a string", msgpack.packb({"type": "hello", "payload": {}, "seq": "1", "timestamp": 0}),
     "seq: expected an integer; got '1'"),
    ("damaged png", image_frame(format="png", data=b"\x89PNG broken", shape=[4, 4, 3]),
     "malformed png image (UnidentifiedImageError)"),
    ("png lying about its size", image_frame(
        format="png", shape=[40000, 40000, 3],
        data=vla_eval.encode({"i": IMAGE})[20:]), "exceeds"),
    ("raw of the wrong length", image_frame(format="raw", data=b"\x00" * 5, dtype="|u1",
                                            shape=[2, 2, 3]), "do not hold uint8 (2, 2, 3)"),
    ("unknown format", image_frame(format="gif", data=b"", shape=[1, 1, 3]),
     "unknown format 'gif'"),
    ("object array", msgpack.packb({"type": "hello", "seq": 1, "timestamp": 0, "payload": {
        "a": {"__ndarray__": True, "data": b"\x00" * 8, "dtype": "|O", "shape": [1]}}}),
     "dtype '|O' may not cross the wire"),
]


@pytest.mark.parametrize("what, frame, message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_vla_eval_frame_is_refused_in_one_line(what, frame, message):
    with pytest.raises(WireError) as refused:
        vla_eval.decode(frame)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_png_whose_pixels_disagree_with_its_shape_is_refused():
    wrong = msgpack.unpackb(vla_eval.encode({"i": IMAGE}))["i"] | {"shape": [12, 16, 3]}
    with pytest.raises(WireError, match="malformed png image: 24x32, not the 12x16"):
        vla_eval.decode(image_frame(**{k: v for k, v in wrong.items() if k != "__image__"}))
