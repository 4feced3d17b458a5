"""Policies that try to excuse their own failures, for the reliability tests; importable by
pool replicas, Ray actors and policy servers."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from workbench.contracts.results import InfrastructureError
from workbench.policies.zero import ZeroPolicy


class HostileStr(RuntimeError):
    """An exception whose message cannot even be read."""

    def __str__(self) -> str:
        raise ValueError("you cannot read me")


def misbehave(how: str) -> None:
    if how == "sys_exit":
        sys.exit(3)
    if how == "os_exit":
        os._exit(4)
    if how == "posix_exit":  # past every guard: only a process of its own survives this
        import posix

        posix._exit(5)
    if how == "memory":
        raise MemoryError("the policy's own allocation")
    if how == "infrastructure":
        raise InfrastructureError("not my fault, says the policy")
    if how == "hostile_str":
        raise HostileStr()
    if how == "huge":
        raise RuntimeError("x" * 20_000_000)
    if how == "hang":
        time.sleep(60)
    raise ValueError(f"unknown misbehaviour {how!r}")


class Misbehaves(ZeroPolicy):
    """Zero actions; at ``step`` of episode index ``k`` it misbehaves as ``hows[k]`` says
    (a list, one entry per episode index, ``"none"`` for a clean episode), or in that
    episode's reset or end (``where``: ``"act"``, ``"reset"`` or ``"end"``), or in ``load``
    or its constructor or ``unload`` as ``hows[0]`` says (``where="load"``, ``"init"`` or
    ``"unload"``), and writes a
    file into ``unloaded_to`` (a folder) when it is unloaded."""

    name = "misbehaves"

    def __init__(self, protocol: str = "metaworld-v1", hows: list = ("none", "sys_exit"),
                 step: int = 5, unloaded_to: str | None = None, where: str = "act") -> None:
        super().__init__(protocol)
        self.hows, self.step, self.unloaded_to = list(hows), step, unloaded_to
        self.where = where
        if where == "init":
            misbehave(self.hows[0])

    def _load(self, context):
        super()._load(context)
        if self.where == "load":
            misbehave(self.hows[0])

    def _how(self, episode_id: str) -> str:
        index = int(str(episode_id).rsplit("/", 1)[-1])
        return self.hows[index] if index < len(self.hows) else "none"

    def _reset(self, context):
        self._misbehave_in("reset", context.episode_id)
        return super()._reset(context)

    def _act(self, observation, episode_state):
        how = self._how(observation["episode_id"])
        if self.where == "act" and how != "none" and observation["step"] == self.step:
            misbehave(how)
        return super()._act(observation, episode_state)

    def _end_episode(self, episode_id, episode_state):
        self._misbehave_in("end", episode_id)
        super()._end_episode(episode_id, episode_state)

    def _misbehave_in(self, where: str, episode_id: str) -> None:
        how = self._how(episode_id)
        if self.where == where and how != "none":
            misbehave(how)

    def _unload(self) -> None:
        if self.where == "unload":
            misbehave(self.hows[0])
        if self.unloaded_to:
            Path(self.unloaded_to).mkdir(parents=True, exist_ok=True)
            (Path(self.unloaded_to) / f"unloaded-{os.getpid()}").write_text("yes")
