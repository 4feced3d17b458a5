"""A protocol defined outside the workbench: MetaWorld's arm under a name of its own,
registered through the ``workbench.protocols`` entry-point group (and carried by the
``plugin-arm`` adapter), so that no table inside the workbench lists it."""

from __future__ import annotations

from dataclasses import replace

from workbench.contracts.protocols import get_protocol

ARM = replace(get_protocol("metaworld-v1"), name="plugin-arm-v1", benchmark="plugin-arm")
