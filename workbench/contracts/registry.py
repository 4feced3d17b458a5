"""Reaching policies and benchmarks by name, import path or entry point.

A reference is one of:

- a registered name (``"expert"``): the workbench's own, or one a package registers
  through the entry-point group of its kind (``workbench.policies``,
  ``workbench.benchmarks``);
- an import path ``"package.module:Name"`` (as uvicorn and Hydra's ``_target_`` use);
- a class or factory object (from a notebook, say).

:meth:`Registry.resolve` turns a reference into a :class:`Factory`: a picklable recipe
that builds the object in whatever process calls it. Worker and replica processes
import an import path by name; a class or function defined in a notebook or script
(``__main__``) travels by value (cloudpickle), so it works there too.

>>> reg = Registry("policy", "workbench.policies", {"dict": "builtins:dict"})
>>> reg.resolve("dict", {"a": 1})()
{'a': 1}
>>> reg.resolve("fractions:Fraction", {"numerator": 3})(denominator=6)
Fraction(1, 2)
>>> reg.resolve("nope")
Traceback (most recent call last):
...
ValueError: unknown policy 'nope'; registered: ['dict']; or pass an import path 'package.module:Name' (or a class or factory)
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping, Sequence


def import_target(path: str) -> Any:
    """The object an import path ``"package.module:Name"`` (or ``module:a.b``) names."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"import path {path!r} must look like 'package.module:Name'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} of {path!r}: {exc}; is its "
                         "folder on PYTHONPATH (or the package installed)?") from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r} ({path!r})")
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Factory:
    """A picklable recipe: ``target`` (import path or callable) called with ``options``.

    ``Factory(...)(**extra)`` builds the object; ``extra`` adds keyword arguments the
    caller supplies (the benchmark's protocol for a policy that asks for one, say).
    """

    target: str | Callable[..., Any]
    options: Mapping[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., Any]:
        """The class or function itself (imported when ``target`` is a path)."""
        return import_target(self.target) if isinstance(self.target, str) else self.target

    def __call__(self, **extra: Any) -> Any:
        return self.load()(**{**self.options, **extra})

    def check(self, kind: str, **extra: Any) -> None:
        """Raise ValueError naming ``kind`` when ``options`` (and ``extra``) do not fit the
        target's signature: an unknown or missing keyword."""
        try:
            inspect.signature(self.load()).bind(**{**self.options, **extra})
        except TypeError as exc:
            shown = repr(dict(self.options))
            shown = shown if len(shown) <= 120 else f"{shown[:120]}... ({len(shown)} characters)"
            raise ValueError(f"{kind}_options {shown} do not fit {self.label}: "
                             f"{str(exc)[:200]}") from None
        except ValueError:
            pass  # a builtin without a signature: the call itself will tell

    def accepts(self, keyword: str) -> bool:
        """Whether the target names ``keyword`` among its parameters."""
        try:
            return keyword in inspect.signature(self.load()).parameters
        except (TypeError, ValueError):
            return False

    @property
    def label(self) -> str:
        """A short name: the import path's last part, or the callable's name."""
        if isinstance(self.target, str):
            return self.target.rpartition(":")[2].rpartition(".")[2]
        return getattr(self.target, "__name__", type(self.target).__name__)

    def __reduce__(self) -> tuple:
        if isinstance(self.target, str):
            return (Factory, (self.target, dict(self.options)))
        import cloudpickle  # by value when defined in __main__, by reference otherwise

        return (_rebuild, (cloudpickle.dumps(self.target), dict(self.options)))


def _rebuild(target: bytes, options: dict) -> Factory:
    return Factory(pickle.loads(target), options)


class Registry:
    """Names of one kind of component, mapped to import paths, plus entry points.

    builtins: the workbench's own names; group: the entry-point group packages
    register in (``[project.entry-points."workbench.policies"]``).
    """

    def __init__(self, kind: str, group: str, builtins: Mapping[str, str]) -> None:
        self.kind, self.group, self.builtins = kind, group, dict(builtins)

    def entry_points(self) -> dict[str, str]:
        """Names registered by installed packages, and their import paths."""
        return {ep.name: ep.value for ep in entry_points(group=self.group)}

    def names(self) -> list[str]:
        return sorted({**self.entry_points(), **self.builtins})

    def resolve(self, ref: str | Callable[..., Any],
                options: Mapping[str, Any] | None = None) -> Factory:
        """A :class:`Factory` for ``ref`` (name, import path or callable) and ``options``."""
        options = dict(options or {})
        if callable(ref) and not isinstance(ref, str):
            return Factory(ref, options)
        if not isinstance(ref, str) or not ref:
            raise ValueError(f"{self.kind}: expected a name, an import path "
                             f"'package.module:Name' or a class; got {ref!r}")
        if ref in self.builtins:
            return Factory(self.builtins[ref], options)
        registered = self.entry_points()
        if ref in registered:
            return Factory(registered[ref], options)
        if ":" in ref:
            import_target(ref)  # fails here, naming the module, rather than in a worker
            return Factory(ref, options)
        raise ValueError(f"unknown {self.kind} {ref!r}; registered: {self.names()}; or pass "
                         "an import path 'package.module:Name' (or a class or factory)")


def adopt_sys_path(paths: Sequence[str]) -> None:
    """Append the entries of a parent's ``sys.path`` this process lacks, so a module the
    parent imports by name (a user's policy) imports here too."""
    for entry in paths:
        if entry not in sys.path:
            sys.path.append(entry)
