"""Benchmark adapters, reached by name, import path or entry point.

``BENCHMARKS`` knows the workbench's own adapters and those that installed packages
register in the ``workbench.benchmarks`` entry-point group; any
:class:`BenchmarkAdapter` subclass is also reachable by its import path
(``"my_package.my_module:MyAdapter"``). Adapter modules (and their simulators) are
imported only when an adapter is needed.

>>> BENCHMARKS.names()  # doctest: +NORMALIZE_WHITESPACE
['aloha', 'calvin', 'isaaclab', 'kitchen', 'libero', 'libero-plus', 'metaworld', 'robocasa',
 'robosuite', 'robotwin']
>>> benchmark_class("metaworld").protocol.name
'metaworld-v1'
"""

from __future__ import annotations

from typing import Any, Callable

from workbench.benchmarks.base import BenchmarkAdapter, StepResult, check_compatibility
from workbench.contracts.protocols import Protocol, is_known_protocol, register_protocol
from workbench.contracts.registry import Factory, Registry
from workbench.contracts.rendering import use_headless_rendering

BENCHMARKS = Registry("benchmark", "workbench.benchmarks",
                      {"aloha": "workbench.benchmarks.aloha:AlohaAdapter",
                       "calvin": "workbench.benchmarks.calvin:CalvinAdapter",
                       "isaaclab": "workbench.benchmarks.isaaclab:IsaacLabAdapter",
                       "kitchen": "workbench.benchmarks.kitchen:KitchenAdapter",
                       "libero": "workbench.benchmarks.libero:LiberoAdapter",
                       "libero-plus": "workbench.benchmarks.libero_plus:LiberoPlusAdapter",
                       "metaworld": "workbench.benchmarks.metaworld:MetaWorldAdapter",
                       "robocasa": "workbench.benchmarks.robocasa:RoboCasaAdapter",
                       "robosuite": "workbench.benchmarks.robosuite:RobosuiteAdapter",
                       "robotwin": "workbench.benchmarks.robotwin:RoboTwinAdapter"})


def benchmark_factory(ref: str | Callable[..., BenchmarkAdapter],
                      **options: Any) -> Factory:
    """A picklable factory for the adapter ``ref`` names, with constructor ``options``."""
    return BENCHMARKS.resolve(ref, options)


def benchmark_class(ref: str | type[BenchmarkAdapter]) -> type[BenchmarkAdapter]:
    """The adapter class ``ref`` names, refusing anything that is not an adapter class."""
    cls = benchmark_factory(ref).load()
    if not (isinstance(cls, type) and issubclass(cls, BenchmarkAdapter)):
        raise ValueError(f"benchmark {ref!r} must name a BenchmarkAdapter subclass; "
                         f"got {cls!r}")
    carried = getattr(cls, "protocol", None)
    if isinstance(carried, Protocol) and not is_known_protocol(carried.name):
        register_protocol(carried)  # an adapter may carry a protocol of its own
    return cls


def make_benchmark(ref: str | type[BenchmarkAdapter], **options: Any) -> BenchmarkAdapter:
    """Build an adapter, e.g. ``make_benchmark("metaworld", suite="MT10", image_size=64)``
    (a protocol the adapter's class carries is registered first, as a run does)."""
    use_headless_rendering()
    benchmark_class(ref)
    return benchmark_factory(ref, **options)()


__all__ = ["BENCHMARKS", "BenchmarkAdapter", "StepResult", "benchmark_class",
           "benchmark_factory", "check_compatibility", "make_benchmark"]
