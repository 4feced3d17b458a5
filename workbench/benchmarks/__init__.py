"""Benchmark protocols and adapters, with a registry that names what is available.

>>> sorted(BENCHMARKS)
['metaworld']
"""

from __future__ import annotations

from typing import Any, Callable

from workbench.benchmarks.base import BenchmarkAdapter, StepResult, check_compatibility
from workbench.benchmarks.protocols import (
    PROTOCOLS,
    ActionContract,
    ContractError,
    Feature,
    Protocol,
    get_protocol,
    validate_action,
    validate_observation,
)


def _metaworld(**options: Any) -> BenchmarkAdapter:
    from workbench.benchmarks.metaworld import MetaWorldAdapter  # lazy: imports mujoco

    return MetaWorldAdapter(**options)


def _metaworld_suites() -> list[str]:
    from workbench.benchmarks.metaworld import list_suites

    return list_suites()


def _metaworld_tasks(suite: str) -> list[str]:
    from workbench.benchmarks.metaworld import suite_tasks

    return suite_tasks(suite)


BENCHMARKS: dict[str, Callable[..., BenchmarkAdapter]] = {"metaworld": _metaworld}
SUITE_LISTERS: dict[str, Callable[[], list[str]]] = {"metaworld": _metaworld_suites}
TASK_LISTERS: dict[str, Callable[[str], list[str]]] = {"metaworld": _metaworld_tasks}


def make_benchmark(name: str, **options: Any) -> BenchmarkAdapter:
    """Build a benchmark adapter by name, e.g. ``make_benchmark("metaworld", suite="MT10")``."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; available: {sorted(BENCHMARKS)}")
    return BENCHMARKS[name](**options)


__all__ = [
    "ActionContract", "BENCHMARKS", "BenchmarkAdapter", "ContractError", "Feature",
    "PROTOCOLS", "Protocol", "StepResult", "check_compatibility", "get_protocol",
    "make_benchmark", "validate_action", "validate_observation",
]
