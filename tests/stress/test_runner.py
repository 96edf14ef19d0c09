"""The stress CLI: clear errors on bad input, and ``--jobs`` giving the same report as one process."""

from __future__ import annotations

import pytest

from tests.fakes import ErrorLogCapture
from tests.stress.driver import ALLOWED_ERRORS
from tests.stress.runner import main, parse_seeds, run_seeds


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seeds", "5:3"], "non-empty range"),
        (["--seeds=-1:3"], "non-empty range"),
        (["--seeds", "many"], "START:STOP or one seed"),
        (["--jobs", "0"], "jobs must be a whole number >= 1"),
        (["--jobs", "two"], "jobs must be a whole number >= 1"),
        (["--replay", "3:9"], "--replay takes one seed"),
        (["--mode", "video"], "invalid choice: 'video'"),
    ],
)
def test_bad_input_is_refused_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_seed_ranges() -> None:
    assert parse_seeds("7") == range(7, 8)
    assert parse_seeds("0:200") == range(0, 200)


def test_jobs_give_the_same_outcomes_in_seed_order(error_logs: ErrorLogCapture) -> None:
    error_logs.allow(*ALLOWED_ERRORS.values())  # checked per scenario by the harness itself
    seeds = range(0, 5)
    parallel = run_seeds(seeds, jobs=2, do_shrink=False)
    alone = run_seeds(seeds, do_shrink=False)
    assert [o.scenario for o in parallel] == [o.scenario for o in alone]
    assert [o.invariants for o in parallel] == [o.invariants for o in alone]
