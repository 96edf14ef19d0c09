"""The proof run (`make prove`, tests/proof.py) must catch a regression test that cannot fail."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.tooling

_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\nmarkers =\n    upstream_bug(ref): x\n"
_TESTS = """
import pytest

@pytest.mark.upstream_bug("livekit/agents#1")
def test_cannot_fail():
    assert True

@pytest.mark.upstream_bug("livekit/agents#2")
def test_catches_the_bug():
    assert False, "the bug shows"

def test_unmarked_guard():
    assert True
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeini(_INI)
    pytester.makepyfile(test_sample=_TESTS)
    return pytester.runpytest("-p", "tests.proof", "-p", "no:cacheprovider", *args)


def test_proof_fails_on_a_marked_test_that_passes(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--prove")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*PROOF FAILED: test_sample.py::test_cannot_fail [[]livekit/agents#1[]] passed on stock*"]
    )
    result.stdout.fnmatch_lines(["*does not catch the bug*or upstream fixed it*"])
    # The marked test that fails counts as proven; the unmarked guard is not run at all.
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2 and outcomes.get("deselected") == 1
    result.stdout.fnmatch_lines(["*proof: 1 upstream_bug tests were red on stock*"])


def test_proof_passes_when_every_marked_test_fails(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--prove", "-k", "not cannot_fail")
    assert result.ret == pytest.ExitCode.OK


def test_normal_run_is_unchanged(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=1)


def test_reference_is_required(pytester: pytest.Pytester) -> None:
    pytester.makeini(_INI)
    pytester.makepyfile(
        test_bad="import pytest\n@pytest.mark.upstream_bug\ndef test_x():\n    assert False\n"
    )
    result = pytester.runpytest("-p", "tests.proof", "--prove")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*upstream_bug needs a reference like*"])


@pytest.mark.parametrize(
    ("ref", "accepted"),
    [("not-yet: closed activities stay alive", True), ("not-yet", False), ("a leak", False)],
)
def test_unfiled_bug_names_what_breaks(pytester: pytest.Pytester, ref: str, accepted: bool) -> None:
    pytester.makeini(_INI)
    pytester.makepyfile(
        test_unfiled=f"import pytest\n@pytest.mark.upstream_bug({ref!r})\ndef test_x():\n    assert False\n"
    )
    result = pytester.runpytest("-p", "tests.proof", "--prove")
    if accepted:
        assert result.ret == pytest.ExitCode.OK
    else:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*or 'not-yet: <what breaks>'*"])


def test_teardown_failure_counts_as_red(pytester: pytest.Pytester) -> None:
    pytester.makeini(_INI)
    pytester.makepyfile(
        test_td="""
import pytest

@pytest.fixture
def hygiene():
    yield
    raise AssertionError("a task was left running")

@pytest.mark.upstream_bug("livekit/agents#3")
def test_leaks(hygiene):
    pass
"""
    )
    result = pytester.runpytest("-p", "tests.proof", "--prove")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
