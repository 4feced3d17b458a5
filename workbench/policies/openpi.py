"""A model served by openpi's policy server (pi0, pi0.5, pi0-FAST), evaluated where it
lives: ``policy: openpi`` with ``policy_options: {url, preset, replan_steps, ...}``.

Each episode opens a connection (the server first sends its metadata), sends the
request an openpi client would build from the observation (:mod:`workbench.wires.presets`:
``openpi/libero`` for LIBERO, ``openpi/aloha`` for ALOHA, ``openpi/metaworld``, or a user
key map), and executes ``replan_steps`` actions of each returned chunk before asking
again, as openpi's LIBERO example does (and refuses a chunk shorter than that, as it
does). The wire is :mod:`workbench.wires.openpi`.

Before a run claims any case, :meth:`OpenpiPolicy.handshake` sends one request built from
a real reset observation: a server that refuses it (a ``KeyError`` for a key the preset
does not send, say), or replies without usable actions, stops the run in one line naming
the key and what the preset sends. Who is blamed during a run: see
:mod:`workbench.policies.wire_link`.

>>> OpenpiPolicy("ws://127.0.0.1:1", protocol="libero-v1").capabilities.chunk_size
5
>>> OpenpiPolicy("ws://127.0.0.1:1", protocol="kitchen-v1")
Traceback (most recent call last):
...
ValueError: the openpi wire has no preset for protocol 'kitchen-v1'; pass preset=NAME or keys={their_key: feature} (presets of the openpi wire: ['openpi/aloha', 'openpi/libero', 'openpi/metaworld'])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from workbench.contracts.capabilities import Capabilities, EpisodeContext, LoadContext, Observation
from workbench.contracts.protocols import get_protocol
from workbench.contracts.wire import MAX_FRAME_BYTES, WireError
from workbench.policies.base import Policy
from workbench.policies.wire_link import (Link, MalformedReply, PreflightError, ServerError,
                                          ServerClient, TransportError, check_timeout,
                                          check_url)
from workbench.wires import openpi
from workbench.wires.native import one_line
from workbench.wires.presets import Preset, choose_preset
from workbench.wires.replies import ReplyError, read_actions


def client_preset(wire: str, protocol: str, preset: str | None,
                  keys: Mapping[str, Any] | None) -> Preset:
    """The preset a client of ``wire`` sends ``protocol``'s observations with."""
    return choose_preset(wire, protocol, preset, keys,
                         "pass preset=NAME or keys={their_key: feature}")


def check_image_size(preset: Preset, observation: Observation) -> None:
    """Refuse cameras rendered at another size than the ecosystem's client renders."""
    if preset.image_size is None:
        return
    for feature in preset.features:
        value = observation.get(feature)
        if feature.startswith("images.") and isinstance(value, np.ndarray) and \
                max(value.shape[:2]) != preset.image_size:
            raise PreflightError(f"preset {preset.name} renders cameras at "
                                 f"{preset.image_size} px as its ecosystem's client does; "
                                 f"this run renders {feature} at {value.shape[1]}x"
                                 f"{value.shape[0]}: set image_size: {preset.image_size}")


@dataclass
class _Episode:
    link: Link


class OpenpiPolicy(ServerClient, Policy):
    """A policy behind an openpi server at ``url`` (see the module).

    protocol: the benchmark protocol (the runner passes the benchmark's); preset: a
    preset name (default: the openpi wire's for the protocol); keys: a user key map
    instead; replan_steps: actions executed per returned chunk (default: the preset's);
    timeout_s: longest wait to connect and for each reply; name: the policy's name in
    records (default ``openpi``).
    """

    def __init__(self, url: str, protocol: str, preset: str | None = None,
                 keys: Mapping[str, Any] | None = None, replan_steps: int | None = None,
                 timeout_s: float = 30.0, max_frame_bytes: int = MAX_FRAME_BYTES,
                 name: str = "openpi") -> None:
        super().__init__()
        self.url, self.timeout_s = check_url(url), check_timeout(timeout_s)
        self.preset = client_preset(openpi.NAME, protocol, preset, keys)
        steps = replan_steps if replan_steps is not None else (self.preset.replan_steps or 1)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"replan_steps: expected an integer >= 1; got {replan_steps!r}")
        self.name, self.max_frame_bytes = name, max_frame_bytes
        self._caps = Capabilities(protocol, self.preset.features, chunk_size=steps)
        self._dim = get_protocol(protocol).action.dim

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    # -- the handshake before the run --------------------------------------------------
    def handshake(self, observation: Observation) -> dict[str, Any]:
        """Connect, read the metadata, send the request built from ``observation`` (a
        real reset observation) and check the reply; returns the metadata. Raises
        :class:`PreflightError` naming the mismatch, TransportError when the server
        cannot be reached."""
        check_image_size(self.preset, observation)
        with Link(self.url, self.timeout_s, self.max_frame_bytes) as link:
            metadata = self._metadata(link)
            try:
                self._chunk(link, observation)
            except (ServerError, MalformedReply) as exc:
                raise PreflightError(f"preflight request refused: {exc}; preset "
                                     f"{self.preset.name} sends {self.preset.describe()}") from None
        return metadata

    # -- lifecycle ----------------------------------------------------------------------
    def _load(self, context: LoadContext) -> None:
        pass

    def _reset(self, context: EpisodeContext) -> _Episode:
        link = Link(self.url, self.timeout_s, self.max_frame_bytes)
        try:
            self._metadata(link)
        except Exception:
            link.close()
            raise
        return _Episode(link)

    def _act(self, observation: Observation, episode: _Episode) -> np.ndarray:
        return self._chunk(episode.link, observation)

    def _end_episode(self, episode_id: str, episode: _Episode) -> None:
        episode.link.close()

    # -- the wire -----------------------------------------------------------------------
    def _metadata(self, link: Link) -> dict[str, Any]:
        frame = link.receive("metadata")
        if isinstance(frame, str):
            raise TransportError(f"openpi server {self.url} sent text instead of its "
                                 f"metadata: {_last_line(frame)}")
        try:
            metadata = openpi.decode(frame, self.max_frame_bytes)
        except WireError as exc:
            raise TransportError(f"malformed metadata from openpi server {self.url}: "
                                 f"{exc}") from None
        return metadata if isinstance(metadata, dict) else {}

    def _chunk(self, link: Link, observation: Observation) -> np.ndarray:
        """The first ``replan_steps`` actions the server returns for ``observation``."""
        try:
            frame = openpi.encode(self.preset.request(observation))
        except WireError as exc:
            raise ValueError(f"cannot send the observation: {exc}") from None
        link.send(frame, "actions")
        reply = link.receive("actions")
        if isinstance(reply, str):
            link.close()
            raise ServerError(f"openpi server {self.url} reported: {_last_line(reply)}")
        try:
            actions = read_actions(openpi.decode(reply, self.max_frame_bytes))
        except (WireError, ReplyError) as exc:
            raise MalformedReply(f"openpi server {self.url} replied {exc}") from None
        steps = self._caps.chunk_size
        if len(actions) < steps or actions.shape[1] != self._dim:
            raise MalformedReply(f"openpi server {self.url} returned actions of shape "
                                 f"{tuple(actions.shape)}; replan_steps {steps} needs at "
                                 f"least ({steps}, {self._dim})")
        return actions[:steps].astype(np.float32)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return one_line(lines[-1] if lines else text)
