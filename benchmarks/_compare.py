"""Run a benchmark module under the fork's and the stock environment and print both.

Each benchmark exposes ``async def measure() -> dict[str, float]``; this runner calls it in
a child process per environment (``python -m benchmarks.<name> --measure``), so fork and
stock are measured in the same run, on the same machine, one after the other.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVS = {"fork": ROOT / ".venv/bin/python", "stock": ROOT / "envs/stock/.venv/bin/python"}


def compare(module: str, goals: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for env, python in ENVS.items():
        if not python.exists():
            sys.exit(f"{python} is missing: run `make setup` first")
        proc = subprocess.run(
            [str(python), "-m", module, "--measure"], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        if proc.returncode != 0:
            sys.exit(f"{module} failed on {env}:\n{proc.stderr[-4000:]}")
        results[env] = json.loads(proc.stdout.strip().splitlines()[-1])
    keys = list(results["fork"])
    width = max(len(k) for k in keys)
    print(f"{module}")
    print(f"  {'figure':<{width}}  {'fork':>10}  {'stock':>10}  {'fork/stock':>10}  goal")
    for key in keys:
        fork, stock = results["fork"][key], results["stock"].get(key, float("nan"))
        ratio = f"{fork / stock:.3f}" if stock else "-"
        print(f"  {key:<{width}}  {fork:>10.4f}  {stock:>10.4f}  {ratio:>10}  {(goals or {}).get(key, '')}")
    return results


def main_measure(measure: object) -> None:
    import asyncio
    import logging

    logging.disable(logging.CRITICAL)  # benchmark output is the JSON line only
    result = asyncio.run(measure())  # type: ignore[arg-type]
    print(json.dumps(result))
