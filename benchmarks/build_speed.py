"""Build all three patched packages from a warm sdist cache and print the wall time.

Goal: <= 10 s on a 2-core machine. Run: `uv run python benchmarks/build_speed.py`.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from lkfork import build, fetch
from lkfork.config import find_root, load_packages


def main() -> None:
    pkgs = load_packages(find_root(Path(__file__)))
    for pkg in pkgs:
        fetch.fetch(pkg, log=False)  # warm the cache; not timed
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        build.run(pkgs, Path(out))
        elapsed = time.perf_counter() - start
    print(f"build of {len(pkgs)} packages from a warm cache: {elapsed:.2f} s (goal <= 10 s)")


if __name__ == "__main__":
    main()
