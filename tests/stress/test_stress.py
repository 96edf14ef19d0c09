"""CI entry of the stress harness: 200 fixed seeds on the installed build, no violation allowed.

Not part of the default run yet: the fork still violates invariants on 12 of these seeds (fork
bugs in the deferred handoff on realtime models, and upstream bugs it shares; see
docs/stress.md). `make stress-ci` runs it (it sets LKFORK_STRESS=1); turn it on by default
once the fork reaches 0.

Each scenario runs in its own event loop (``asyncio.run``), so this test is synchronous.
A failure lists every failing seed with its replay command (``python -m tests.stress --replay
SEED`` shrinks it). ERROR records a scenario causes on purpose are checked per scenario by the
harness (``ALLOWED_ERRORS``), so the per-test hygiene capture is told to tolerate exactly those.
"""

from __future__ import annotations

import os

import pytest

from tests.fakes import ErrorLogCapture
from tests.stress.driver import ALLOWED_ERRORS
from tests.stress.runner import report, run_seeds

CI_SEEDS = range(0, 200)


@pytest.mark.skipif(
    not os.environ.get("LKFORK_STRESS"),
    reason="the fork is not at 0 violations yet (docs/stress.md); run `make stress-ci`",
)
def test_stress_200_fixed_seeds_violate_no_invariant(error_logs: ErrorLogCapture) -> None:
    error_logs.allow(*ALLOWED_ERRORS.values())
    outcomes = run_seeds(CI_SEEDS, do_shrink=False)
    failing = [o.scenario.seed for o in outcomes if o.violations]
    assert not failing, report(outcomes, f"{CI_SEEDS.start}:{CI_SEEDS.stop}")
