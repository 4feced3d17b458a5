"""A model served by a vla-eval model server (OpenVLA, CogACT, GR00T and the rest),
evaluated where it lives: ``policy: vla-eval`` with ``policy_options: {url, preset, ...}``.

Each episode opens a connection and speaks as vla-eval's own benchmark runner does
(:mod:`workbench.wires.vla_eval`): ``hello`` (answered by the server's), ``episode_start``
with the task, one ``observation`` per step built with the preset (``vla-eval/libero``,
``vla-eval/metaworld``, or a user key map; images PNG-encoded unless ``image_format:
raw``), each answered by one ``action``, and ``episode_end``. A vla-eval server keeps
action chunks itself and hands out one action per observation, so this policy reads
every step (chunk size 1). Where the server's hello asks for ``observation_params`` it
has no say: the preset sends what it sends, and the handshake shows whether that is
enough.

Before a run claims any case, :meth:`VlaEvalPolicy.handshake` runs one exchange (hello,
episode start, one observation built from a real reset observation, episode end): an
``error`` reply, or an action of the wrong shape, stops the run in one line. Who is
blamed during a run: see :mod:`workbench.policies.wire_link`.

>>> VlaEvalPolicy("ws://127.0.0.1:1", protocol="metaworld-v1").capabilities.features
('images.primary', 'images.wrist', 'state', 'instruction')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from workbench.contracts.capabilities import Capabilities, EpisodeContext, LoadContext, Observation
from workbench.contracts.protocols import get_protocol
from workbench.contracts.wire import MAX_FRAME_BYTES, WireError
from workbench.policies.base import Policy
from workbench.policies.openpi import check_image_size, client_preset
from workbench.policies.wire_link import (Link, MalformedReply, PreflightError, ServerError,
                                          ServerClient, TransportError, check_timeout,
                                          check_url)
from workbench.wires import vla_eval
from workbench.wires.native import one_line
from workbench.wires.replies import ReplyError, read_actions


@dataclass
class _Episode:
    link: Link
    seq: int = 0
    steps: int = 0
    server: dict[str, Any] = field(default_factory=dict)


class VlaEvalPolicy(ServerClient, Policy):
    """A policy behind a vla-eval model server at ``url`` (see the module).

    protocol: the benchmark protocol (the runner passes the benchmark's); preset: a
    preset name (default: the vla-eval wire's for the protocol); keys: a user key map
    instead; image_format: ``png`` (vla-eval's default) or ``raw``; timeout_s: longest
    wait to connect and for each reply; name: the policy's name in records.
    """

    def __init__(self, url: str, protocol: str, preset: str | None = None,
                 keys: Mapping[str, Any] | None = None, image_format: str = "png",
                 timeout_s: float = 30.0, max_frame_bytes: int = MAX_FRAME_BYTES,
                 name: str = "vla-eval") -> None:
        super().__init__()
        self.url, self.timeout_s = check_url(url), check_timeout(timeout_s)
        if image_format not in ("png", "raw"):
            raise ValueError(f"image_format: expected png or raw; got {image_format!r}")
        self.preset = client_preset(vla_eval.NAME, protocol, preset, keys)
        self.image_format, self.name, self.max_frame_bytes = image_format, name, max_frame_bytes
        self._caps = Capabilities(protocol, self.preset.features, chunk_size=1)
        self._dim = get_protocol(protocol).action.dim

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    # -- the handshake before the run --------------------------------------------------
    def handshake(self, observation: Observation) -> dict[str, Any]:
        """One exchange built from ``observation`` (a real reset observation); returns
        the server's hello. Raises :class:`PreflightError` naming the mismatch,
        TransportError when the server cannot be reached."""
        check_image_size(self.preset, observation)
        context = EpisodeContext("preflight", "", str(observation.get("instruction", "")), 0)
        episode = self._open(context)
        try:
            self._exchange(episode, observation)
        except (ServerError, MalformedReply) as exc:
            raise PreflightError(f"preflight observation refused: {exc}; preset "
                                 f"{self.preset.name} sends {self.preset.describe()}") from None
        finally:
            self._close(episode)
        return episode.server

    # -- lifecycle ----------------------------------------------------------------------
    def _load(self, context: LoadContext) -> None:
        pass

    def _reset(self, context: EpisodeContext) -> _Episode:
        return self._open(context)

    def _act(self, observation: Observation, episode: _Episode) -> np.ndarray:
        return self._exchange(episode, observation)

    def _end_episode(self, episode_id: str, episode: _Episode) -> None:
        self._close(episode)

    # -- the wire -----------------------------------------------------------------------
    def _open(self, context: EpisodeContext) -> _Episode:
        episode = _Episode(Link(self.url, self.timeout_s, self.max_frame_bytes))
        try:
            self._send(episode, "hello", vla_eval.hello_payload())
            reply = self._receive(episode, "hello")
            if reply["type"] != "hello":
                raise TransportError(f"vla-eval server {self.url} answered hello with "
                                     f"{reply['type']!r}")
            episode.server = reply["payload"]
            self._send(episode, "episode_start", {"task": {
                "name": context.task, "instruction": context.instruction,
                "episode_id": context.episode_id, "seed": context.seed}})
        except Exception:
            episode.link.close()
            raise
        return episode

    def _exchange(self, episode: _Episode, observation: Observation) -> np.ndarray:
        seq = self._send(episode, "observation", self.preset.request(observation))
        reply = self._receive(episode, "action")
        if reply["type"] == "error":
            raise ServerError(f"vla-eval server {self.url} reported: "
                              f"{one_line(str(reply['payload'].get('error', reply['payload'])))}")
        if reply["type"] != "action" or reply["seq"] != seq:
            raise MalformedReply(f"vla-eval server {self.url} answered observation {seq} with "
                                 f"{reply['type']!r} {reply['seq']}")
        try:
            actions = read_actions(reply["payload"])
        except ReplyError as exc:
            raise MalformedReply(f"vla-eval server {self.url} replied {exc}") from None
        if actions.shape[1] != self._dim:
            raise MalformedReply(f"vla-eval server {self.url} returned actions of shape "
                                 f"{tuple(actions.shape)}, not ({self._dim},)")
        episode.steps += 1
        return actions[:1].astype(np.float32)

    def _close(self, episode: _Episode) -> None:
        try:
            if episode.link.alive:
                self._send(episode, "episode_end", {"metrics": {}, "steps": episode.steps})
        except TransportError:
            pass  # the server is gone: nothing to tell it
        finally:
            episode.link.close()

    def _send(self, episode: _Episode, kind: str, payload: dict[str, Any]) -> int:
        episode.seq += 1
        try:
            frame = vla_eval.encode(vla_eval.envelope(kind, payload, episode.seq),
                                    self.image_format)  # type: ignore[arg-type]
        except WireError as exc:
            raise ValueError(f"cannot send the {kind}: {exc}") from None
        episode.link.send(frame, "the server")
        return episode.seq

    def _receive(self, episode: _Episode, what: str) -> dict[str, Any]:
        frame = episode.link.receive(what)
        try:
            if isinstance(frame, str):
                raise WireError("a text frame, not a vla-eval message")
            return vla_eval.decode(frame, self.max_frame_bytes)
        except WireError as exc:
            if what == "hello":
                raise TransportError(f"vla-eval server {self.url} sent no hello: {exc}") from None
            raise MalformedReply(f"vla-eval server {self.url} replied {exc}") from None
