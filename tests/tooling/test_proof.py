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
    result.stdout.fnmatch_lines(["*proof: 1 upstream_bug tests were red on stock for the bug, 1 were not*"])
    # each verdict with the exception that decided it
    result.stdout.fnmatch_lines_random(
        [
            "RED     test_sample.py::test_catches_the_bug [[]livekit/agents#2[]]: AssertionError: the bug shows",
            "NOT RED test_sample.py::test_cannot_fail [[]livekit/agents#1[]]: passed on stock",
        ]
    )


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


def _prove(pytester: pytest.Pytester, source: str) -> pytest.RunResult:
    pytester.makeini(_INI)
    pytester.makepyfile(test_rules=source)
    return pytester.runpytest("-p", "tests.proof", "-p", "no:cacheprovider", "--prove")


_HYGIENE = """
import asyncio
import pytest

@pytest.fixture
def hygiene():
    yield
    pytest.fail("[hygiene]\\n1 task(s) still running 1s after the test", pytrace=False)
"""


def test_a_red_hygiene_teardown_alone_does_not_count(pytester: pytest.Pytester) -> None:
    result = _prove(
        pytester,
        _HYGIENE
        + """
@pytest.mark.upstream_bug("livekit/agents#3")
def test_leaks(hygiene):
    pass
""",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*PROOF FAILED: test_rules.py::test_leaks*passed on stock*only the teardown failed*",
            "NOT RED test_rules.py::test_leaks [[]livekit/agents#3[]]: passed its body on stock*[[]hygiene[]]*",
        ]
    )


def test_a_hygiene_teardown_after_a_red_body_is_ignored(pytester: pytest.Pytester) -> None:
    result = _prove(
        pytester,
        _HYGIENE
        + """
@pytest.mark.upstream_bug("livekit/agents#3")
def test_leaks(hygiene):
    assert 1 == 2, "the caller was answered twice"
""",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "RED     test_rules.py::test_leaks*: AssertionError: the caller was answered twice (teardown also failed)"
        ]
    )


def test_a_setup_error_does_not_count(pytester: pytest.Pytester) -> None:
    result = _prove(
        pytester,
        """
import pytest

@pytest.fixture
def broken():
    raise KeyError("no such fake")

@pytest.mark.upstream_bug("livekit/agents#3")
def test_x(broken):
    assert False
""",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["NOT RED test_rules.py::test_x*: KeyError: 'no such fake' (setup error)"])


_TIMEOUTS = """
import asyncio
import pytest
from tests.fakes.sync import BoundedWaitTimeout, bounded

async def never():
    await asyncio.Event().wait()

@pytest.mark.upstream_bug("livekit/agents#4")
async def test_bounded_wait(){args}:
    await bounded(never(), 0.01, what="session.run()")

@pytest.mark.upstream_bug("livekit/agents#4")
async def test_asyncio_timeout():
    await asyncio.wait_for(never(), 0.01)

@pytest.mark.upstream_bug("livekit/agents#4", raises=BoundedWaitTimeout, match=r"session\\.run")
async def test_declared_hang():
    await bounded(never(), 0.01, what="session.run()")

@pytest.mark.upstream_bug("livekit/agents#4", raises=BoundedWaitTimeout, match=r"session\\.run")
async def test_declared_hang_other_wait():
    await bounded(never(), 0.01, what="the greeting")
"""


def test_a_timeout_counts_only_when_declared(pytester: pytest.Pytester) -> None:
    pytester.makeini(_INI + "asyncio_mode = auto\n")
    pytester.makepyfile(test_rules=_TIMEOUTS.format(args=""))
    result = pytester.runpytest("-p", "tests.proof", "-p", "no:cacheprovider", "--prove")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines_random(
        [
            "NOT RED test_rules.py::test_bounded_wait*: BoundedWaitTimeout: timed out after 0.01s waiting for"
            " session.run() (a timeout*",
            "NOT RED test_rules.py::test_asyncio_timeout*: TimeoutError*(a timeout*",
            "RED     test_rules.py::test_declared_hang*: BoundedWaitTimeout:*session.run() (declared raises=)",
            # declared for one wait, another one timing out proves nothing
            "NOT RED test_rules.py::test_declared_hang_other_wait*: BoundedWaitTimeout:*the greeting (a timeout*",
            "*proof: 1 upstream_bug tests were red on stock for the bug, 3 were not*",
        ]
    )


_RAISES = """
import pytest

@pytest.mark.upstream_bug("livekit/agents#5", raises=KeyError)
def test_declared_type():
    {{}}["form"]

@pytest.mark.upstream_bug("livekit/agents#5", raises=KeyError)
def test_other_type():
    raise RuntimeError("AgentSession is closing")

@pytest.mark.upstream_bug("livekit/agents#5", raises=KeyError)
def test_assert_still_counts():
    assert [] == ["record 1"]

@pytest.mark.upstream_bug("livekit/agents#5")
def test_undeclared():
    {{}}["form"]

@pytest.mark.upstream_bug("livekit/agents#5", raises=RuntimeError, match="draining")
def test_declared_message():
    raise RuntimeError("cannot schedule new speech, the speech scheduling is draining")

@pytest.mark.upstream_bug("livekit/agents#5", raises=RuntimeError, match="draining")
def test_other_message():
    raise RuntimeError("no activity context found")
"""


def test_a_declared_raises_counts_only_for_its_type(pytester: pytest.Pytester) -> None:
    result = _prove(pytester, _RAISES.format())
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines_random(
        [
            "RED     test_rules.py::test_declared_type*: KeyError: 'form' (declared raises=)",
            "NOT RED test_rules.py::test_other_type*: RuntimeError: AgentSession is closing (not an assertion*",
            "RED     test_rules.py::test_assert_still_counts*: AssertionError: assert [[]] == [[]'record 1'[]]",
            "NOT RED test_rules.py::test_undeclared*: KeyError: 'form' (not an assertion: declare raises=*",
            "RED     test_rules.py::test_declared_message*: RuntimeError: cannot schedule*(declared raises=)",
            "NOT RED test_rules.py::test_other_message*: RuntimeError: no activity context found*",
        ]
    )
    # the run's own failure list says why, too
    result.stdout.fnmatch_lines(
        ["*PROOF FAILED: test_rules.py::test_other_type*failed on stock, but not for the bug*"]
    )


def test_did_not_raise_counts_only_when_declared(pytester: pytest.Pytester) -> None:
    result = _prove(
        pytester,
        """
import pytest

def update_agent():
    pass  # stock accepts what the fork refuses

@pytest.mark.upstream_bug("livekit/agents#6")
def test_new_api():
    with pytest.raises(RuntimeError):
        update_agent()

@pytest.mark.upstream_bug("livekit/agents#6", missing_raise=RuntimeError)
def test_declared():
    with pytest.raises(RuntimeError):
        update_agent()
""",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines_random(
        [
            "NOT RED test_rules.py::test_new_api*: Failed: DID NOT RAISE RuntimeError (undeclared: mark it fork_api*",
            "RED     test_rules.py::test_declared*: Failed: DID NOT RAISE RuntimeError (declared missing_raise=)",
        ]
    )


def test_an_assertion_inside_a_helper_module_does_not_count(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(helper="def check(x):\n    assert x, 'checked elsewhere'\n")
    result = _prove(
        pytester,
        """
import pytest
from helper import check

def local_check(x):
    assert x, "checked here"

@pytest.mark.upstream_bug("livekit/agents#7")
def test_elsewhere():
    check(False)

@pytest.mark.upstream_bug("livekit/agents#7")
def test_local_helper():
    local_check(False)

@pytest.mark.upstream_bug("livekit/agents#7")
def test_explicit_fail():
    pytest.fail("the input was lost")
""",
    )
    result.stdout.fnmatch_lines_random(
        [
            "NOT RED test_rules.py::test_elsewhere*: AssertionError: checked elsewhere (raised outside the test module)",
            "RED     test_rules.py::test_local_helper*: AssertionError: checked here",
            "RED     test_rules.py::test_explicit_fail*: Failed: the input was lost",
        ]
    )


@pytest.mark.parametrize(
    ("marks", "message"),
    [
        ('upstream_bug("livekit/agents#8", raises=AssertionError)', "would count any timeout"),
        ('upstream_bug("livekit/agents#8", raises="KeyError")', "takes exception types"),
        ('upstream_bug("livekit/agents#8", match="x")', "is a regex for raises="),
    ],
)
def test_bad_declarations_are_refused(pytester: pytest.Pytester, marks: str, message: str) -> None:
    pytester.makeini(_INI)
    pytester.makepyfile(test_bad=f"import pytest\n@pytest.mark.{marks}\ndef test_x():\n    assert False\n")
    result = pytester.runpytest("-p", "tests.proof", "--prove")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


_FORK_API = """
import pytest

@pytest.mark.fork_api
def test_new_api():
    assert False, "stock has no such API"

def test_guard():
    assert True
"""


def test_fork_api_tests_are_not_proven_and_skip_on_stock(pytester: pytest.Pytester) -> None:
    pytester.makeini(_INI)
    pytester.makepyfile(test_api=_FORK_API)
    proof = pytester.runpytest("-p", "tests.proof", "--prove")
    assert proof.ret == pytest.ExitCode.OK  # nothing to prove
    assert proof.parseoutcomes().get("deselected") == 2
    normal = pytester.runpytest("-p", "tests.proof")
    normal.assert_outcomes(passed=1, failed=1)


def test_fork_api_and_upstream_bug_exclude_each_other(pytester: pytest.Pytester) -> None:
    pytester.makeini(_INI)
    pytester.makepyfile(
        test_both='import pytest\n@pytest.mark.fork_api\n@pytest.mark.upstream_bug("livekit/agents#9")\n'
        "def test_x():\n    assert False\n"
    )
    result = pytester.runpytest("-p", "tests.proof")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*upstream_bug and fork_api exclude each other*"])


def test_an_open_case_marked_xfail_is_still_proven(pytester: pytest.Pytester) -> None:
    """A test of a bug the fork does not fix yet carries xfail(strict=True) so the fork suite
    stays green; the proof must still run it on stock and see it fail for the bug."""
    pytester.makeini(_INI)
    pytester.makepyfile(
        test_open="""
import pytest

@pytest.mark.upstream_bug("livekit/agents#3")
@pytest.mark.xfail(strict=True, reason="not fixed on the fork yet")
def test_open_case():
    assert False, "the bug shows"

@pytest.mark.upstream_bug("livekit/agents#4")
@pytest.mark.xfail(strict=True, reason="not fixed on the fork yet")
def test_open_case_that_cannot_fail():
    assert True
"""
    )
    result = pytester.runpytest("-p", "tests.proof", "-p", "no:cacheprovider", "--prove")
    result.stdout.fnmatch_lines_random(
        [
            "RED     test_open.py::test_open_case [[]livekit/agents#3[]]: AssertionError: the bug shows",
            "NOT RED test_open.py::test_open_case_that_cannot_fail [[]livekit/agents#4[]]: passed on stock",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # a plain run keeps the markers: one xfailed, one strict xpass failing
    plain = pytester.runpytest("-p", "tests.proof", "-p", "no:cacheprovider")
    plain.assert_outcomes(xfailed=1, failed=1)
