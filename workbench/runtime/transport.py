"""Observations between processes without re-encoding: images in shared memory.

A simulator worker owns one :class:`ObservationSlot`; it copies each camera frame
into it and sends only a small header (offsets, shapes, the non-image features)
over a pipe. The policy replica maps the same memory and hands the policy array
views, not copies. One request per worker is in flight at a time, so the worker
never overwrites a frame the replica is still reading.

>>> slot = ObservationSlot.create(2 * 8 * 8 * 3)
>>> header = slot.write({"images.primary": np.ones((8, 8, 3), np.uint8), "state": np.zeros(4)})
>>> reader = SlotReader()
>>> obs = reader.read(header)
>>> int(obs["images.primary"].sum()), obs["state"].shape
(192, (4,))
>>> del obs; reader.close(); slot.close()
"""

from __future__ import annotations

from multiprocessing import shared_memory
from typing import Any, Mapping

import numpy as np

from workbench.contracts.results import InfrastructureError


class SlotOverflow(InfrastructureError):
    """An observation the worker's shared-memory slot cannot carry (larger than the slot)."""


class ObservationSlot:
    """A worker's shared-memory buffer for image features."""

    def __init__(self, shm: shared_memory.SharedMemory) -> None:
        self.shm = shm

    @classmethod
    def create(cls, nbytes: int) -> "ObservationSlot":
        return cls(shared_memory.SharedMemory(create=True, size=max(int(nbytes), 1)))

    @property
    def name(self) -> str:
        return self.shm.name

    def write(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """Copy uint8 arrays into the slot; return the header that describes the observation."""
        offset, arrays, inline = 0, {}, {}
        for key, value in obs.items():
            if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 3:
                end = offset + value.nbytes
                if end > self.shm.size:
                    raise SlotOverflow(f"observation needs {end} bytes of shared memory; the "
                                         f"worker's slot holds {self.shm.size} ({key!r} is "
                                         f"{value.shape}; the run was sized for its image_size)")
                np.ndarray(value.shape, np.uint8, self.shm.buf, offset)[...] = value
                arrays[key] = (offset, value.shape)
                offset = end
            else:
                inline[key] = value
        return {"slot": self.name, "arrays": arrays, "inline": inline}

    def close(self, unlink: bool = True) -> None:
        self.shm.close()
        if unlink:
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass


class SlotReader:
    """The replica side: maps worker slots by name (once) and builds zero-copy views."""

    def __init__(self) -> None:
        self._open: dict[str, shared_memory.SharedMemory] = {}

    def read(self, header: Mapping[str, Any]) -> dict[str, Any]:
        shm = self._attach(header["slot"]) if header["arrays"] else None
        obs = dict(header["inline"])
        for key, (offset, shape) in header["arrays"].items():
            obs[key] = np.ndarray(shape, np.uint8, shm.buf, offset)
        return obs

    def _attach(self, name: str) -> shared_memory.SharedMemory:
        if name not in self._open:
            # Spawned processes share the parent's resource tracker: the worker's unlink
            # unregisters the segment, and a worker killed outright leaves the tracker
            # to remove it at shutdown.
            self._open[name] = shared_memory.SharedMemory(name=name)
        return self._open[name]

    def forget(self, name: str) -> None:
        shm = self._open.pop(name, None)
        if shm is not None:
            shm.close()

    def close(self) -> None:
        for name in list(self._open):
            self.forget(name)
