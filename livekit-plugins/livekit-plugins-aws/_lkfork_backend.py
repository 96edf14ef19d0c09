"""PEP 517 backend shim: builds the pinned upstream sdist with our patches (tools/lkfork)."""

import sys
from pathlib import Path

sys.path.insert(0, str(next(p for p in Path(__file__).resolve().parents if (p / "tools/lkfork").is_dir()) / "tools"))
from lkfork.pep517 import *  # noqa: E402,F403
