"""Names a package loads on first use: a package's ``__init__`` maps each public name
to the module that defines it, and the module ``__getattr__`` and ``__dir__`` made
here import that module only when the name is first read (PEP 562).

>>> import types
>>> package = types.ModuleType("demo")
>>> package.__getattr__, package.__dir__ = lazy_exports(package, {"sqrt": "math"})
>>> package.__getattr__("sqrt")(9.0), "sqrt" in vars(package)
(3.0, True)
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable, Mapping


def lazy_exports(module: ModuleType | str, exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``module`` (a module or its name in sys.modules):
    a name of ``exports`` is imported from its module on first use and kept in the
    package's namespace; any other name is an AttributeError naming the package."""
    import sys

    def namespace() -> dict[str, Any]:
        return vars(sys.modules[module] if isinstance(module, str) else module)

    def __getattr__(name: str) -> Any:
        if name not in exports:
            owner = module if isinstance(module, str) else module.__name__
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace()) | set(exports))

    return __getattr__, __dir__
