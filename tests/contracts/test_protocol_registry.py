"""Protocols are open: a session or a package registers its own, and everything that
looks one up by name finds it; a known name is never redefined."""

from dataclasses import replace

import pytest

from workbench.benchmarks import benchmark_class
from workbench.contracts.protocols import (get_protocol, is_known_protocol, protocol_names,
                                           register_protocol)


def test_a_registered_protocol_is_found_by_name_and_listed():
    mine = replace(get_protocol("metaworld-v1"), name="test-arm-v1", benchmark="test-arm")
    assert not is_known_protocol("test-arm-v1")
    assert register_protocol(mine) is mine
    assert get_protocol("test-arm-v1") is mine and "test-arm-v1" in protocol_names()
    assert register_protocol(mine) is mine  # the same definition again: a no-op


def test_a_known_name_is_never_redefined_and_a_non_protocol_is_refused():
    other = replace(get_protocol("metaworld-v1"), name="libero-v1")
    with pytest.raises(ValueError, match="'libero-v1' is already known with another"):
        register_protocol(other)
    assert get_protocol("libero-v1").action.dim == 7  # untouched
    with pytest.raises(ValueError, match="expected a Protocol; got a dict"):
        register_protocol({"name": "x"})
    with pytest.raises(ValueError, match="unknown protocol 'nope'; available: .*metaworld-v1"):
        get_protocol("nope")


def test_an_adapter_carrying_a_protocol_of_its_own_registers_it():
    cls = benchmark_class("wb_plugin.benchmarks:PluginArm")
    assert get_protocol("plugin-arm-v1") is cls.protocol
    assert benchmark_class("aloha").protocol.name == "robotwin2-v1"  # a variant of a known
    # name is the adapter's own business; the table's definition stands
