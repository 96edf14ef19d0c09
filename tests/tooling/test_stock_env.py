"""The stock environment must be exactly the upstream releases the patches are pinned to,
or `make prove` would prove something about another version."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lkfork.config import find_root, load_packages

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.tooling
REPO = find_root(Path(__file__))


def test_stock_env_pins_match_upstream_toml() -> None:
    deps = tomllib.loads((REPO / "envs/stock/pyproject.toml").read_text())["project"]["dependencies"]
    pinned = {d.split("==")[0].split("[")[0]: d.split("==")[1] for d in deps if "==" in d}
    for pkg in load_packages(REPO):
        assert pinned.get(pkg.distribution) == pkg.version, f"envs/stock pins {pkg.distribution} differently"
    lock = tomllib.loads((REPO / "envs/stock/uv.lock").read_text())
    locked = {p["name"]: p for p in lock["package"]}
    for pkg in load_packages(REPO):
        entry = locked[pkg.distribution]
        assert entry["version"] == pkg.version
        assert entry["sdist"]["hash"] == f"sha256:{pkg.sha256}", "the stock env must use the pinned sdist"
