"""Fixtures for the patch-queue tool's tests: a throwaway copy of the repository's package
directories and a file:// package index, so bad input can be staged without touching
the real tree or the network (beyond one warm-up fetch of the pinned sdists)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lkfork import fetch
from lkfork.config import PACKAGE_DIRS, find_root, load_packages

REPO = find_root(Path(__file__))


@pytest.fixture(scope="session")
def cached_sdists() -> dict[str, Path]:
    """The real pinned sdists, verified (downloads once into the user's cache)."""
    return {p.distribution: fetch.fetch(p, log=False) for p in load_packages(REPO)}


def make_index(root: Path, files: dict[str, Path]) -> str:
    """A PEP 503 index at ``root`` serving ``{distribution: file}``; returns its file:// URL."""
    for dist, path in files.items():
        page = root / dist
        page.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, page / path.name)
        (page / "index.html").write_text(f'<a href="{path.name}">{path.name}</a>\n')
    return root.as_uri() + "/"


@pytest.fixture
def index(tmp_path: Path, cached_sdists: dict[str, Path]) -> str:
    return make_index(tmp_path / "index", cached_sdists)


@pytest.fixture
def fork(tmp_path: Path, index: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the package directories, with an empty cache and the local index."""
    root = tmp_path / "repo"
    for d in PACKAGE_DIRS:
        # the real pins and build shims, but an empty series: these tests stage their own
        # patches (the real series is verified by `make check`)
        shutil.copytree(REPO / d, root / d, ignore=shutil.ignore_patterns("*.patch", "upstream"))
        series = root / d / "patches/series"
        series.write_text(
            "".join(line for line in series.read_text().splitlines(True) if line.startswith("#"))
        )
    monkeypatch.setenv("LKFORK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LKFORK_INDEX_URL", index)
    monkeypatch.delenv("LKFORK_OFFLINE", raising=False)
    yield root


def lkfork(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would (a child process, with the fixture's environment)."""
    return subprocess.run(
        [sys.executable, "-m", "lkfork", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
