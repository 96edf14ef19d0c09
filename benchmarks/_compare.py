"""Run a benchmark module under the fork's and the stock environment and print both.

Each benchmark exposes ``async def measure() -> dict[str, float]``; this runner calls it in
a child process per environment (``python -m benchmarks.<name> --measure``), so fork and
stock are measured in the same run, on the same machine, one after the other.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVS = {"fork": ROOT / ".venv/bin/python", "stock": ROOT / "envs/stock/.venv/bin/python"}


def compare(
    module: str, goals: dict[str, str] | None = None, *, repeats: int = 1
) -> dict[str, dict[str, float]]:
    """Measure ``module`` on both environments, alternating ``repeats`` times; medians.

    Alternating fork and stock, rather than running one after the other, keeps a change of
    the machine's load from landing on one side only.
    """
    runs: dict[str, list[dict[str, float]]] = {env: [] for env in ENVS}
    for _ in range(repeats):
        for env, python in ENVS.items():
            if not python.exists():
                sys.exit(f"{python} is missing: run `make setup` first")
            proc = subprocess.run(
                [str(python), "-m", module, "--measure"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=900,
            )
            if proc.returncode != 0:
                sys.exit(f"{module} failed on {env}:\n{proc.stderr[-4000:]}")
            runs[env].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    results = {env: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for env, rs in runs.items()}
    keys = list(results["fork"])
    width = max(len(k) for k in keys)
    print(f"{module}" + (f" (median of {repeats} alternating runs each)" if repeats > 1 else ""))
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
