"""Policy wires: the three ways a policy is reached over a network, one module each.

- :mod:`.native` (``workbench``): the workbench's own policy wire, canonical feature
  names, explicit resets, errors that say whom to blame;
- :mod:`.openpi` (``openpi``): openpi's websocket + msgpack-numpy wire, metadata first,
  an observation in and an action chunk out, errors as a text frame and close 1011;
- :mod:`.vla_eval` (``vla-eval``): vla-eval's envelopes (hello, episode start and end,
  one action per observation), images as PNG or raw;

and :mod:`.presets`, the tables that turn canonical observations into an ecosystem's
request and back. Below the service and the policies, above the contracts: a wire knows
frames and fields, never a policy or a benchmark.

>>> sorted(WIRES)
['openpi', 'vla-eval', 'workbench']
"""

from workbench.wires.presets import (PRESETS, Field, Preset, default_preset, get_preset,
                                     preset_from_keys)

WIRES = {"workbench": "workbench.wires.native", "openpi": "workbench.wires.openpi",
         "vla-eval": "workbench.wires.vla_eval"}
"""Wire name -> the module that states and codes it."""


def check_wire(name: str) -> str:
    """``name`` when it is a wire; refuses another with the list."""
    if name not in WIRES:
        raise ValueError(f"unknown wire {name!r}; available: {sorted(WIRES)}")
    return name


__all__ = ["PRESETS", "WIRES", "Field", "Preset", "check_wire", "default_preset", "get_preset",
           "preset_from_keys"]
