"""Observation presets: how the workbench's canonical features become another
ecosystem's request, as data.

A :class:`Preset` is a table of :class:`Field` rows, one per key the ecosystem's client
sends: where the value goes (its key, or nested keys), which canonical feature it comes
from, and what the other side receives (dtype, shape, an image resized with padding or
turned channels-first). The same table runs both ways: :meth:`Preset.request` builds
the request a client of that ecosystem would send from a workbench observation (the
``policy: openpi`` and ``policy: vla-eval`` clients), and :meth:`Preset.observation`
reads such a request back into canonical features (``workbench serve-policy --wire``),
refusing, in one line naming the key, a value of the wrong type, dtype or shape.

The shipped presets (:data:`PRESETS`) are written from the ecosystems' own clients:

- ``openpi/libero``: openpi's LIBERO example (``examples/libero/main.py``): both cameras
  rendered at 256 and turned upright (the adapter already turns them as that client
  does, ``[::-1, ::-1]``), resized with padding to 224, ``observation/state`` the 8-D
  end-effector position, axis-angle and gripper joints as float64, ``prompt`` the
  instruction; the client executes ``replan_steps`` (5) actions of each chunk.
- ``openpi/aloha``: openpi's aloha_sim example (``examples/aloha_sim/env.py``): the top
  camera resized with padding to 224 and sent channels-first under
  ``images: {cam_high}``, ``state`` the 14 joint values as float64.
- ``openpi/metaworld``: MetaWorld in the LIBERO example's conventions (openpi ships no
  MetaWorld client).
- ``vla-eval/libero``: vla-eval's LIBERO benchmark (``vla_eval.benchmarks.libero``):
  ``images: {agentview, wrist}`` at 256, upright, ``states`` (the 8-D state from the
  observation, float64), ``controller_states`` (the same from the controller, float32),
  ``task_description``.
- ``vla-eval/metaworld``: MetaWorld in vla-eval's conventions (vla-eval ships no
  MetaWorld benchmark): ``images: {primary, wrist}``, ``states``, ``task_description``.

For anything else a user key map (``policy_options.keys``, :func:`preset_from_keys`)
names which feature goes under which key, nested maps allowed, values as the workbench
holds them.

>>> preset = get_preset("openpi/libero")
>>> preset.features
('images.primary', 'images.wrist', 'state.eef8', 'instruction')
>>> [f.shown for f in preset.fields]
['observation/image', 'observation/wrist_image', 'observation/state', 'prompt']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from workbench.contracts.protocols import ContractError, Protocol, get_protocol
from workbench.wires.images import resize_with_pad, to_channels_first, to_channels_last


@dataclass(frozen=True)
class Field:
    """One key of a request.

    path: the key, or nested keys (``("images", "cam_high")``); feature: the canonical
    feature it carries; dtype and shape: what the other side receives (``"str"`` with
    shape ``()`` for text; None in a shape: any size); resize: ``(height, width)`` the
    image is resized to with padding before it is sent; channels_first: sent as (C, H, W).
    """

    path: tuple[str, ...]
    feature: str
    dtype: str
    shape: tuple[int | None, ...] = ()
    resize: tuple[int, int] | None = None
    channels_first: bool = False

    @property
    def shown(self) -> str:
        """The key as a reader writes it: ``prompt``, ``images['cam_high']``."""
        return self.path[0] + "".join(f"[{p!r}]" for p in self.path[1:])

    @property
    def spec(self) -> str:
        """What the other side receives, in words: ``uint8 (224, 224, 3)``."""
        return "str" if self.dtype == "str" else f"{self.dtype} {_shape(self.shape)}"

    def send(self, value: Any) -> Any:
        """The canonical ``value`` as the other side receives it."""
        if self.dtype == "str":
            return str(value)
        array = np.asarray(value)
        if self.resize is not None:
            array = resize_with_pad(array, *self.resize)
        if self.channels_first:
            array = to_channels_first(array)
        return np.ascontiguousarray(array.astype(self.dtype, copy=False))

    def receive(self, value: Any, protocol: Protocol) -> Any:
        """What the other side sent, checked and turned into the canonical feature;
        raises ContractError naming the key."""
        if self.dtype == "str":
            if not isinstance(value, str):
                raise ContractError(f"{self.shown}: expected a string; got "
                                    f"{type(value).__name__}")
            return value
        if not isinstance(value, np.ndarray):
            raise ContractError(f"{self.shown}: expected an array {self.spec}; got "
                                f"{type(value).__name__}")
        if not _dtype_fits(value.dtype, np.dtype(self.dtype)) or \
                not _shape_fits(value.shape, self.shape):
            raise ContractError(f"{self.shown}: expected {self.spec}; got {value.dtype} "
                                f"{_shape(value.shape)}")
        if self.channels_first:
            value = to_channels_last(value)
        wanted = protocol.feature(self.feature).dtype
        return np.ascontiguousarray(value.astype(wanted, copy=False))


def _dtype_fits(got: np.dtype, wanted: np.dtype) -> bool:
    """Images: expected the dtype stated; numbers may come as any float (or int) width."""
    if wanted.kind == "u" or got.kind == "b":
        return got == wanted
    return got.kind in "fiu" if wanted.kind == "f" else got.kind in "iu"


def _shape_fits(got: tuple[int, ...], wanted: tuple[int | None, ...]) -> bool:
    return len(got) == len(wanted) and all(w is None or g == w for g, w in zip(got, wanted))


def _shape(shape: tuple[int | None, ...]) -> str:
    return "(" + ", ".join("N" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


@dataclass(frozen=True)
class Preset:
    """How one ecosystem's client sends one benchmark protocol's observations.

    name: ``<wire>/<family>``; protocols: the protocols it reads (a family's variants);
    image_size: the camera resolution that client renders at (None: any);
    replan_steps: actions of each returned chunk it executes before asking again
    (None: one request per step, the server keeping any chunk); params: switches of
    the ecosystem's benchmark a server turns on to be sent features (vla-eval's
    ``observation_params``: switch -> the features it brings).
    """

    name: str
    wire: str
    protocols: tuple[str, ...]
    fields: tuple[Field, ...]
    image_size: int | None = None
    replan_steps: int | None = None
    params: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def switches(self, features: Sequence[str]) -> dict[str, bool]:
        """The benchmark switches that bring ``features`` (those of :attr:`params`)."""
        return {name: True for name, brings in self.params if set(brings) & set(features)}

    @property
    def features(self) -> tuple[str, ...]:
        """The canonical features it reads, in field order, each once."""
        return tuple(dict.fromkeys(f.feature for f in self.fields))

    def check_protocol(self, protocol: str) -> Protocol:
        """The protocol, refused (ContractError) when the preset is not for it."""
        if protocol not in self.protocols:
            raise ContractError(f"preset {self.name!r} is for {list(self.protocols)}; the "
                                f"benchmark speaks {protocol!r}")
        return get_protocol(protocol)

    def request(self, observation: Mapping[str, Any]) -> dict[str, Any]:
        """The request the ecosystem's client would send for ``observation`` (a map of
        canonical features), nested keys as nested maps."""
        out: dict[str, Any] = {}
        for field in self.fields:
            if field.feature not in observation:
                raise ContractError(f"preset {self.name}: the observation lacks "
                                    f"{field.feature!r} (for {field.shown})")
            _place(out, field.path, field.send(observation[field.feature]))
        return out

    def observation(self, request: Any, protocol: str,
                    features: Sequence[str] | None = None) -> dict[str, Any]:
        """The canonical ``features`` (default: all the preset's) in ``request``; raises
        ContractError naming the first of their keys that is missing or holds the wrong
        type, dtype or shape (other keys are ignored, as the ecosystems' servers ignore
        what their model does not read)."""
        proto = self.check_protocol(protocol)
        if not isinstance(request, Mapping):
            raise ContractError(f"a request: expected a map; got {type(request).__name__}")
        wanted = set(self.features if features is None else features)
        out = {}
        for field in (f for f in self.fields if f.feature in wanted):
            value = _find(request, field.path)
            if value is _MISSING:
                raise ContractError(f"{field.shown}: missing; preset {self.name} expects "
                                    f"{self.describe()}")
            out[field.feature] = field.receive(value, proto)
        return out

    def describe(self) -> str:
        """Every key with what it holds: ``prompt str, observation/state float64 (8,)``."""
        return ", ".join(f"{f.shown} {f.spec}" for f in self.fields)


_MISSING = object()


def _place(out: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        out = out.setdefault(key, {})
    out[path[-1]] = value


def _find(request: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = request
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return _MISSING
        value = value[key]
    return value


def _image(path: tuple[str, ...], feature: str, size: int | None,
           channels_first: bool = False) -> Field:
    shape = (3, size, size) if channels_first else (size, size, 3)
    return Field(path, feature, "uint8", shape if size else (None, None, 3),
                 (size, size) if size else None, channels_first)


_LIBERO_FAMILY = ("libero-v1", "libero-plus-v1")

PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("openpi/libero", "openpi", _LIBERO_FAMILY, (
        _image(("observation/image",), "images.primary", 224),
        _image(("observation/wrist_image",), "images.wrist", 224),
        Field(("observation/state",), "state.eef8", "float64", (8,)),
        Field(("prompt",), "instruction", "str")), image_size=256, replan_steps=5),
    Preset("openpi/aloha", "openpi", ("robotwin2-v1",), (
        _image(("images", "cam_high"), "images.head", 224, channels_first=True),
        Field(("state",), "state", "float64", (14,))), image_size=640, replan_steps=10),
    Preset("openpi/metaworld", "openpi", ("metaworld-v1",), (
        _image(("observation/image",), "images.primary", 224),
        Field(("observation/state",), "state", "float64", (4,)),
        Field(("prompt",), "instruction", "str")), image_size=224, replan_steps=5),
    Preset("vla-eval/libero", "vla-eval", _LIBERO_FAMILY, (
        Field(("images", "agentview"), "images.primary", "uint8", (256, 256, 3)),
        Field(("images", "wrist"), "images.wrist", "uint8", (256, 256, 3)),
        Field(("states",), "state.eef8", "float64", (8,)),
        Field(("controller_states",), "state.controller8", "float32", (8,)),
        Field(("task_description",), "instruction", "str")), image_size=256,
        params=(("send_wrist_image", ("images.wrist",)),
                ("send_state", ("state.eef8", "state.controller8")))),
    Preset("vla-eval/metaworld", "vla-eval", ("metaworld-v1",), (
        Field(("images", "primary"), "images.primary", "uint8", (None, None, 3)),
        Field(("images", "wrist"), "images.wrist", "uint8", (None, None, 3)),
        Field(("states",), "state", "float32", (4,)),
        Field(("task_description",), "instruction", "str")),
        params=(("send_wrist_image", ("images.wrist",)),)),
)}
"""The shipped presets by name (see the module docstring for their sources)."""


def get_preset(name: str) -> Preset:
    """The preset called ``name``; refuses an unknown one with the list."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; available: {sorted(PRESETS)}")
    return PRESETS[name]


def default_preset(wire: str, protocol: str) -> Preset | None:
    """The shipped preset of ``wire`` for ``protocol``, if there is one."""
    found = [p for p in PRESETS.values() if p.wire == wire and protocol in p.protocols]
    return found[0] if found else None


def choose_preset(wire: str, protocol: str, preset: str | None,
                  keys: Mapping[str, Any] | None, how: str) -> Preset:
    """The preset ``wire`` carries ``protocol``'s observations with: ``keys`` (a user key
    map), else the named ``preset``, else the wire's own for the protocol. Giving both is
    refused, and so is a wire with no preset for the protocol (``how`` says how to pass
    one, in the caller's terms: options of a config, flags of a command)."""
    if preset is not None and keys is not None:
        raise ValueError(f"give a preset or a key map, not both ({how})")
    if keys is not None:
        return preset_from_keys(wire, protocol, keys)
    if preset is not None:
        chosen = get_preset(preset)
        if chosen.wire != wire:
            raise ValueError(f"preset {preset!r}: expected one of the {wire} wire; got one "
                             f"of the {chosen.wire} wire")
        chosen.check_protocol(protocol)
        return chosen
    found = default_preset(wire, protocol)
    if found is None:
        names = sorted(n for n, p in PRESETS.items() if p.wire == wire)
        raise ValueError(f"the {wire} wire has no preset for protocol {protocol!r}; {how} "
                         f"(presets of the {wire} wire: {names})")
    return found


def preset_from_keys(wire: str, protocol: str, keys: Any) -> Preset:
    """A preset from a user key map ``{their_key: canonical feature}`` (a nested map for
    nested keys), each value sent as the workbench holds it; refuses a key that is not a
    non-empty string and a feature the protocol does not declare.

    >>> p = preset_from_keys("openpi", "metaworld-v1", {"img": "images.primary",
    ...                                                  "obs": {"state": "state"}})
    >>> [(f.shown, f.spec) for f in p.fields]
    [('img', 'uint8 (N, N, 3)'), ("obs['state']", 'float32 (4,)')]
    """
    proto = get_protocol(protocol)
    fields = tuple(_fields_from_keys(keys, (), proto))
    if not fields:
        raise ValueError("keys: map at least one key to a feature (their key: our feature)")
    return Preset(f"{wire}/keys", wire, (protocol,), fields)


def _fields_from_keys(keys: Any, prefix: tuple[str, ...], proto: Protocol) -> list[Field]:
    where = "keys" + "".join(f"[{p!r}]" for p in prefix)
    if not isinstance(keys, Mapping):
        raise ValueError(f"{where}: expected a map of their keys to features; got "
                         f"{type(keys).__name__}")
    fields: list[Field] = []
    for key, value in keys.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{where}: keys: expected non-empty strings; got {key!r}")
        if isinstance(value, Mapping):
            fields += _fields_from_keys(value, (*prefix, key), proto)
            continue
        if not isinstance(value, str):
            raise ValueError(f"{where}[{key!r}]: expected a feature name; got {value!r}")
        try:
            feature = proto.feature(value)
        except ContractError as exc:
            raise ValueError(f"{where}[{key!r}]: {exc}") from None
        fields.append(Field((*prefix, key), value, feature.dtype, feature.shape))
    return fields
