"""What decides a frozen campaign's behaviour, as files and their SHA-256: every file of
the workbench package (code, data, weights; not only ``.py``), the local modules a
policy or benchmark comes from and the local modules those import, and the files a
policy's options name (weights, checkpoints, tables).

"Local" is any file Python imports from outside its standard library and installed
packages (``site-packages``): the user's own code, which a package version does not pin.
:class:`FrozenSources` re-checks them cheaply (a file is hashed again only when its size,
time or inode changed), so a campaign can check before every claim.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp()) / "pkg"
>>> root.mkdir(); _ = (root / "table.csv").write_text("a,b\\n")
>>> frozen = FrozenSources({"files": package_files(root)}, roots={"files": root})
>>> frozen.changed()
[]
>>> _ = (root / "table.csv").write_text("a,b,c\\n")
>>> frozen.changed()
['pkg/table.csv (modified)']
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any, Iterable, Mapping

MAX_LOCAL_MODULES = 500
"""At most this many local modules are followed from one policy or benchmark."""
MAX_OPTION_FILES = 1000
"""At most this many files are hashed under one folder a policy option names."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_files(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (compiled caches left out), by path relative to
    ``root``'s parent."""
    return {str(p.relative_to(root.parent)): sha256_file(p) for p in _walk(root)}


def _walk(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in (".pyc", ".pyo"))


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    return tuple(os.path.realpath(r) + os.sep for r in roots if r)


def is_local(path: str | os.PathLike, exclude: Iterable[Path] = ()) -> bool:
    """Whether ``path`` is the user's own code: not in the standard library or installed
    packages, and not under any of ``exclude`` (the workbench, hashed whole)."""
    real = os.path.realpath(path)
    if real.startswith(_installed_roots()):
        return False
    return not any(real.startswith(str(Path(e).resolve()) + os.sep) for e in exclude)


def local_modules(obj: Any, exclude: Iterable[Path] = ()) -> dict[str, str]:
    """SHA-256 of the local source file defining ``obj`` (a class or function) and of the
    local modules it imports, followed transitively, by absolute path; empty when ``obj``
    comes from an installed package or has no source file."""
    module = inspect.getmodule(obj)
    start = getattr(module, "__file__", None)
    if start is None or not start.endswith(".py") or not is_local(start, exclude):
        return {}
    exclude = tuple(exclude)
    found: dict[str, str] = {}
    todo = [(str(Path(start).resolve()), module.__name__)]
    while todo and len(found) < MAX_LOCAL_MODULES:
        path, name = todo.pop()
        if path in found:
            continue
        found[path] = sha256_file(Path(path))
        for imported in _imports(Path(path), name):
            origin = _origin(imported)
            if origin and origin.endswith(".py") and is_local(origin, exclude) \
                    and str(Path(origin).resolve()) not in found:
                todo.append((str(Path(origin).resolve()), imported))
    return dict(sorted(found.items()))


def _imports(path: Path, module: str) -> list[str]:
    """Absolute names of the modules ``path`` (module ``module``) imports."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - node.level + 1] if node.level > 1 else parts
                base = ".".join(p for p in [*parts, base] if p)
            if base:
                names.append(base)
                names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return names


def _origin(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    return getattr(spec, "origin", None) if spec is not None else None


def option_files(options: Mapping[str, Any]) -> dict[str, str]:
    """SHA-256 of the files that ``options`` (a policy's) name, by absolute path: every
    string value, at any depth, that is an existing file, or a folder (its files, at most
    :data:`MAX_OPTION_FILES`)."""
    found: dict[str, str] = {}
    for value in _strings(options):
        path = Path(value).expanduser()
        try:
            if path.is_file():
                found[str(path.resolve())] = sha256_file(path)
            elif path.is_dir():
                for p in _walk(path)[:MAX_OPTION_FILES]:
                    found[str(p.resolve())] = sha256_file(p)
        except (OSError, ValueError):  # a string that is not a usable path
            continue
    return dict(sorted(found.items()))


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        if 0 < len(value) < 4096 and "\x00" not in value:
            yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


class FrozenSources:
    """Groups of files frozen as ``{group: {path: sha256}}``; :meth:`changed` names what
    differs now. ``roots``: for a group that is a whole folder (the workbench package),
    the folder, so that added files count too (paths there are relative to its parent);
    ``labels``: what to call a group's files in the message (``policy source``)."""

    def __init__(self, frozen: Mapping[str, Mapping[str, str]],
                 roots: Mapping[str, Path] | None = None,
                 labels: Mapping[str, str] | None = None) -> None:
        self.frozen = {g: dict(files) for g, files in frozen.items()}
        self.roots = {g: Path(r) for g, r in (roots or {}).items()}
        self.labels = dict(labels or {})
        self._seen: dict[Path, tuple[tuple[int, int, int], str]] = {}

    def _hash(self, path: Path) -> str | None:
        try:
            st = path.stat()
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        seen = self._seen.get(path)
        if seen is not None and seen[0] == key:
            return seen[1]
        digest = sha256_file(path)
        self._seen[path] = (key, digest)
        return digest

    def changed(self) -> list[str]:
        """``path (modified|removed|added)`` for every file that differs, sorted."""
        changed = []
        for group, files in self.frozen.items():
            root = self.roots.get(group)
            base = root.parent if root is not None else None
            label = f"{self.labels[group]} " if group in self.labels else ""
            for name, digest in files.items():
                now = self._hash(base / name if base is not None else Path(name))
                if now != digest:
                    changed.append(f"{name} ({label}{'removed' if now is None else 'modified'})")
            if root is not None:
                changed += [f"{p.relative_to(base)} ({label}added)" for p in _walk(root)
                            if str(p.relative_to(base)) not in files]
        return sorted(changed)
