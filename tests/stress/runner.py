"""Run seeds, tabulate violations by invariant, shrink failing scenarios; the CLI.

    python -m tests.stress --seeds 0:200 [--replay SEED] [--json out.json] [--no-shrink] [--jobs N]
                           [--mode text|nova|audio]

Each scenario runs in an event loop of its own (``asyncio.run``), with a fresh AgentSession.
``--jobs N`` runs the seeds in N processes; the report is the same as one process's, in seed
order. Stock sits out many 3 s bounds, which is where it helps.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import logging
import multiprocessing
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

from .driver import run_scenario
from .invariants import INVARIANTS, Violation
from .scenario import Scenario, generate, shrink_candidates

MODES = ("text", "nova", "audio")
"""``text``: scripted LLM / realtime models (scenario.py, driver.py); ``nova``: the aws plugin's
Nova Sonic against the Bedrock stream fake (nova.py); ``audio``: the caller's turns spoken through
the session's audio input, VAD and STT or a realtime model's server (audio.py)."""


@dataclass(frozen=True)
class Mode:
    generate: Callable[[int], Any]
    run_scenario: Callable[[Any], Any]
    shrink_candidates: Callable[[Any], Iterator[Any]]
    invariants: Mapping[str, str]
    replay_flag: str = ""


def get_mode(name: str) -> Mode:
    if name == "nova":
        from . import nova

        return Mode(nova.generate, nova.run_scenario, nova.shrink_candidates, nova.INVARIANTS, " --mode nova")
    if name == "audio":
        from . import audio

        return Mode(
            audio.generate, audio.run_scenario, audio.shrink_candidates, audio.INVARIANTS, " --mode audio"
        )
    if name != "text":
        raise ValueError(f"unknown stress mode {name!r}, expected one of {MODES}")
    return Mode(generate, run_scenario, shrink_candidates, INVARIANTS)


SHRINK_BUDGET = 60
"""Most candidate scenarios the minimiser runs for one failing seed."""


@dataclass
class Outcome:
    scenario: Scenario
    violations: list[Violation]
    seconds: float
    shrunk: Scenario | None = None
    shrunk_violations: list[Violation] = field(default_factory=list)

    @property
    def invariants(self) -> set[str]:
        return {v.invariant for v in self.violations}


def run_one(sc: Scenario, mode: str = "text") -> list[Violation]:
    """One scenario in a fresh event loop; an exception escaping the driver is a violation."""
    try:
        return asyncio.run(get_mode(mode).run_scenario(sc))
    except Exception as e:
        where = traceback.extract_tb(e.__traceback__)[-3:]
        frames = " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in reversed(where))
        return [Violation("driver_ok", f"{type(e).__name__}: {e} at {frames}")]


def shrink(
    sc: Scenario, failing: set[str], budget: int = SHRINK_BUDGET, mode: str = "text"
) -> tuple[Scenario, list[Violation]]:
    """Greedy: take the first simpler candidate that still violates every invariant in ``failing``."""
    best, best_v = sc, []
    progress = True
    while progress and budget > 0:
        progress = False
        for cand in get_mode(mode).shrink_candidates(best):
            budget -= 1
            got = run_one(cand, mode)
            if failing <= {v.invariant for v in got}:
                best, best_v, progress = cand, got, True
                break
            if budget <= 0:
                break
    return best, best_v


def run_seed(seed: int, do_shrink: bool = True, mode: str = "text") -> Outcome:
    sc = get_mode(mode).generate(seed)
    t0 = time.perf_counter()
    violations = run_one(sc, mode)
    outcome = Outcome(sc, violations, time.perf_counter() - t0)
    if violations and do_shrink:
        outcome.shrunk, outcome.shrunk_violations = shrink(sc, outcome.invariants, mode=mode)
    return outcome


def run_seeds(
    seeds: Sequence[int], *, do_shrink: bool = True, progress: bool = False, jobs: int = 1, mode: str = "text"
) -> list[Outcome]:
    """Every seed's outcome, in seed order; ``jobs`` > 1 runs them in that many processes."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    with contextlib.ExitStack() as stack:
        if jobs == 1:
            results: Iterator[Outcome] = (run_seed(seed, do_shrink, mode) for seed in seeds)
        else:
            # spawn: a forked worker would inherit the parent's logging handlers and asyncio
            # state; a worker starts without the CLI's logging setup, hence the initializer
            pool = stack.enter_context(
                concurrent.futures.ProcessPoolExecutor(
                    max_workers=jobs,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_quiet_livekit_logs,
                )
            )
            chunksize = max(1, len(seeds) // (jobs * 8))
            results = pool.map(
                run_seed, seeds, itertools.repeat(do_shrink), itertools.repeat(mode), chunksize=chunksize
            )
        outcomes: list[Outcome] = []
        for n, outcome in enumerate(results):
            outcomes.append(outcome)
            if progress and (n + 1) % 100 == 0:
                bad = sum(1 for o in outcomes if o.violations)
                print(f"  ... {n + 1} seeds, {bad} failing", file=sys.stderr, flush=True)
        return outcomes


def table(outcomes: list[Outcome], invariants: Mapping[str, str] = INVARIANTS) -> str:
    n = len(outcomes)
    by_inv = Counter(inv for o in outcomes for inv in o.invariants)
    total = sum(1 for o in outcomes if o.violations)
    width = max(len(k) for k in invariants)
    lines = [f"{'invariant':<{width}}  seeds violating (of {n})"]
    for name in invariants:
        lines.append(f"{name:<{width}}  {by_inv.get(name, 0)}")
    lines.append(f"{'ANY':<{width}}  {total}")
    return "\n".join(lines)


def report(outcomes: list[Outcome], seeds_arg: str, mode: str = "text") -> str:
    secs = sum(o.seconds for o in outcomes)
    head = (
        f"livekit-agents {version('livekit-agents')}, seeds {seeds_arg}: N={len(outcomes)}, "
        f"{secs:.1f}s in scenarios"
    )
    flag = get_mode(mode).replay_flag
    if flag:
        head += f", mode {mode}"
    parts = [head, table(outcomes, get_mode(mode).invariants)]
    for o in outcomes:
        if not o.violations:
            continue
        parts.append(
            f"\nseed {o.scenario.seed} FAILED: python -m tests.stress --replay {o.scenario.seed}{flag}"
        )
        for v in o.violations[:5]:
            parts.append(f"  {v.invariant}: {v.detail}")
        if o.shrunk is not None:
            parts.append("  shrunk to: " + o.shrunk.describe().replace("\n", "\n  "))
    return "\n".join(parts)


def to_json(outcomes: list[Outcome], seeds_arg: str, mode: str = "text") -> dict[str, Any]:
    flag = get_mode(mode).replay_flag
    return {
        "livekit_agents": version("livekit-agents"),
        "mode": mode,
        "seeds": seeds_arg,
        "n": len(outcomes),
        "failing": sum(1 for o in outcomes if o.violations),
        "by_invariant": dict(Counter(inv for o in outcomes for inv in o.invariants)),
        "failures": [
            {
                "seed": o.scenario.seed,
                "replay": f"python -m tests.stress --replay {o.scenario.seed}{flag}",
                "violations": [[v.invariant, v.detail] for v in o.violations],
                "scenario": o.scenario.to_json(),
                "shrunk": o.shrunk.to_json() if o.shrunk else None,
            }
            for o in outcomes
            if o.violations
        ],
    }


def parse_seeds(text: str) -> range:
    """``START:STOP`` (half-open, START < STOP) or one seed ``N``."""
    lo, sep, hi = text.partition(":")
    try:
        seeds = range(int(lo), int(hi)) if sep else range(int(lo), int(lo) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be START:STOP or one seed, got {text!r}") from None
    if not seeds or seeds.start < 0:
        raise argparse.ArgumentTypeError(f"seeds must be a non-empty range of seeds >= 0, got {text!r}")
    return seeds


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"jobs must be a whole number >= 1, got {text!r}")
    return jobs


def _quiet_livekit_logs() -> None:
    # the livekit loggers are captured per scenario; keep WARNINGs from reaching stderr
    logging.getLogger("livekit").addHandler(logging.NullHandler())
    logging.getLogger("livekit").propagate = False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.stress", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:200", type=parse_seeds, help="START:STOP (half-open) or one seed")
    ap.add_argument("--replay", type=parse_seeds, help="run one seed, print its scenario and violations")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--no-shrink", action="store_true", help="do not minimise failing scenarios")
    ap.add_argument("--jobs", type=_jobs, default=1, help="processes to split the seeds over (default 1)")
    ap.add_argument(
        "--mode", choices=MODES, default="text", help="text (default), nova or audio (docs/stress.md)"
    )
    args = ap.parse_args(argv)
    if args.replay is not None and len(args.replay) != 1:
        ap.error("--replay takes one seed")
    _quiet_livekit_logs()

    seeds: range = args.replay if args.replay is not None else args.seeds
    seeds_arg = f"{seeds.start}" if len(seeds) == 1 else f"{seeds.start}:{seeds.stop}"
    if args.replay is not None:
        print(get_mode(args.mode).generate(seeds.start).describe())
    progress = len(seeds) >= 500
    outcomes = run_seeds(
        seeds, do_shrink=not args.no_shrink, progress=progress, jobs=args.jobs, mode=args.mode
    )
    print(report(outcomes, seeds_arg, args.mode))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(outcomes, seeds_arg, args.mode), f, indent=1)
    return 1 if any(o.violations for o in outcomes) else 0
