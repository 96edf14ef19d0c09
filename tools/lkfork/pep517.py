"""An in-tree PEP 517 backend: building a package directory builds the patched upstream.

Each package directory (``livekit-agents/`` ...) has a small ``_lkfork_backend.py`` that puts
this package on ``sys.path`` and re-exports these hooks, so
``pip install "livekit-agents @ git+<repo>#subdirectory=livekit-agents"`` fetches the pinned
sdist, applies the series and hands the tree to upstream's own backend (hatchling).
"""

from __future__ import annotations

import importlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import load_package
from .source import build_system, patched_tree

_tree: tuple[Path, int] | None = None
_scratch: tempfile.TemporaryDirectory[str] | None = None


def _prepared() -> tuple[Path, int]:
    """The patched source of the package in the current directory (made once per process)."""
    global _tree, _scratch
    if _tree is None:
        pkg = load_package(Path.cwd())
        _scratch = tempfile.TemporaryDirectory(prefix="lkfork-")
        _tree = patched_tree(pkg, Path(_scratch.name) / "src")
    return _tree


def _call(hook: str, *args: Any) -> Any:
    src, epoch = _prepared()
    _, backend_name = build_system(src)
    mod, _, obj = backend_name.partition(":")
    backend: Any = importlib.import_module(mod)
    for part in filter(None, obj.split(".")):
        backend = getattr(backend, part)
    fn: Callable[..., Any] | None = getattr(backend, hook, None)
    if fn is None:
        return None
    here = os.getcwd()
    os.environ.setdefault("SOURCE_DATE_EPOCH", str(epoch))
    os.chdir(src)
    try:
        return fn(*args)
    finally:
        os.chdir(here)


def _abs(path: str) -> str:
    return os.path.abspath(path)  # hooks run with cwd switched to the patched tree


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return build_system(_prepared()[0])[0]


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    return build_system(_prepared()[0])[0]


def build_wheel(
    wheel_directory: str, config_settings: dict[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    return str(_call("build_wheel", _abs(wheel_directory), config_settings))


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    return str(_call("build_sdist", _abs(sdist_directory), config_settings))
