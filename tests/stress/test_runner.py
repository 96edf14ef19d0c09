"""The stress CLI: clear errors on bad input, ``--jobs`` giving the same report as one process, and
each ``--mode`` with its own scenarios, table and replay commands."""

from __future__ import annotations

import pytest

from tests.fakes import ErrorLogCapture
from tests.stress.driver import ALLOWED_ERRORS
from tests.stress.invariants import INVARIANTS, SPOKEN_INVARIANTS, Violation
from tests.stress.runner import MODES, Outcome, get_mode, main, parse_seeds, report, run_seeds, to_json


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


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_has_its_scenarios_table_and_replay_command(mode: str) -> None:
    if mode == "nova":
        pytest.importorskip("livekit.plugins.aws.experimental.realtime")
    m = get_mode(mode)
    assert m.generate(3) == m.generate(3)
    assert m.replay_flag == ("" if mode == "text" else f" --mode {mode}")
    assert set(INVARIANTS) <= set(m.invariants)
    assert (set(SPOKEN_INVARIANTS) <= set(m.invariants)) == (mode == "audio")
    failed = Outcome(m.generate(3), [Violation("driver_ok", "boom")], 0.0)
    replay = f"python -m tests.stress --replay 3{m.replay_flag}"
    text = report([failed], "3", mode)
    assert f"seed 3 FAILED: {replay}\n" in text
    assert all(f"\n{name} " in text for name in m.invariants)
    assert to_json([failed], "3", mode)["failures"][0]["replay"] == replay


def test_an_unknown_mode_is_refused_by_the_runner_too() -> None:
    with pytest.raises(ValueError, match="unknown stress mode 'video'"):
        run_seeds([0], do_shrink=False, mode="video")


def test_replay_in_audio_mode_prints_the_audio_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--mode", "audio", "--replay", "0", "--no-shrink"])
    out = capsys.readouterr().out
    assert out.startswith("seed 0 (audio): ")
    assert "seeds 0: N=1" in out and ", mode audio\n" in out
