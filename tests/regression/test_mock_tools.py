"""``mock_tools()`` hands a mock the parameters it declares, matched by name.

Its docstring promises that "a mock may declare any subset of the real tool's parameters".
Stock 1.8.9 passes the real call's arguments to the mock by position, trimmed to the mock's
arity, so a mock ``lambda topic: ...`` of ``research(self, ctx: RunContext, topic: str)``
receives the ``RunContext`` as ``topic``, and a mock taking ``**kwargs`` receives nothing.
Found while testing livekit/agents#5936, not filed upstream on its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunContext, RunResult, function_tool, mock_tools

from tests.fakes import ErrorLogCapture, MakeSession, Reply, ScriptedLLM, bounded, tool_call

BUG = pytest.mark.upstream_bug("livekit/agents#5936")

RESEARCHER = "You are the research agent."
REAL_OUTPUT = "the real research tool ran"


class Researcher(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=RESEARCHER)

    @function_tool
    async def research(self, ctx: RunContext, topic: str, depth: int = 1) -> str:
        """Research a topic.

        Args:
            topic: what to research
            depth: how deep to go
        """
        return REAL_OUTPUT


@contextmanager
def mocked(session: AgentSession[Any], mock: Callable[..., Any], form: str) -> Iterator[None]:
    """Install ``mock`` for ``research`` with either public form of ``mock_tools``."""
    if form == "context":
        with mock_tools(Researcher, {"research": mock}):
            yield
    else:
        mock_tools(Researcher, {"research": mock}, session=session)
        try:
            yield
        finally:
            mock_tools(Researcher, {}, session=session)


async def research_turn(
    make_session: MakeSession, mock: Callable[..., Any], *, form: str = "context", arguments: dict[str, Any]
) -> tuple[RunResult[Any], ScriptedLLM]:
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("research", arguments)]), "Here is what I found."])
    session = await make_session(Researcher(), llm=fake)
    with mocked(session, mock, form):
        result: RunResult[Any] = await bounded(session.run(user_input="Research bees."), what="research turn")
    result.expect.contains_function_call(name="research")
    return result, fake


def tool_output(result: RunResult[Any]) -> Any:
    outputs = [ev.item for ev in result.events if ev.type == "function_call_output"]
    assert len(outputs) == 1, result.events
    return outputs[0]


def record_topic(seen: list[Any]) -> Callable[[Any], str]:
    def mock(topic: Any) -> str:
        seen.append(topic)
        return f"mocked research on {topic}"

    return mock


def record_async_topic(seen: list[Any]) -> Callable[[Any], Any]:
    async def mock(topic: Any) -> str:
        seen.append(topic)
        return f"mocked research on {topic}"

    return mock


@BUG
@pytest.mark.parametrize("form", ["context", "session"])
@pytest.mark.parametrize("make_mock", [record_topic, record_async_topic], ids=["sync", "async"])
async def test_mock_gets_the_parameter_it_names(
    make_session: MakeSession, error_logs: ErrorLogCapture, form: str, make_mock: Callable[..., Any]
) -> None:
    seen: list[Any] = []
    result, _ = await research_turn(make_session, make_mock(seen), form=form, arguments={"topic": "bees"})
    assert seen == ["bees"], f"the mock's `topic` received {seen!r}"
    out = tool_output(result)
    assert not out.is_error and out.output == "mocked research on bees", out
    assert not error_logs.records


@BUG
async def test_mock_parameters_in_another_order(make_session: MakeSession) -> None:
    seen: list[tuple[Any, Any]] = []

    def mock(depth: Any, topic: Any) -> str:
        seen.append((depth, topic))
        return "mocked"

    result, _ = await research_turn(make_session, mock, arguments={"topic": "bees", "depth": 3})
    assert seen == [(3, "bees")]
    assert tool_output(result).output == "mocked"


@BUG
async def test_mock_with_var_keyword_gets_the_parameters_by_name(make_session: MakeSession) -> None:
    seen: list[dict[str, Any]] = []

    def mock(**kwargs: Any) -> str:
        seen.append(kwargs)
        return "mocked"

    result, _ = await research_turn(make_session, mock, arguments={"topic": "bees", "depth": 3})
    assert len(seen) == 1
    kwargs = seen[0]
    assert kwargs.get("topic") == "bees" and kwargs.get("depth") == 3, kwargs
    assert set(kwargs) <= {"ctx", "topic", "depth"}, kwargs
    if "ctx" in kwargs:
        assert isinstance(kwargs["ctx"], RunContext)
    assert tool_output(result).output == "mocked"


async def test_mock_without_parameters(make_session: MakeSession, error_logs: ErrorLogCapture) -> None:
    calls: list[str] = []

    def mock() -> str:
        calls.append("called")
        return "mocked without parameters"

    result, fake = await research_turn(make_session, mock, arguments={"topic": "bees", "depth": 3})
    assert calls == ["called"]
    out = tool_output(result)
    assert not out.is_error and out.output == "mocked without parameters", out
    # the model answered the mock's output, and the real tool never ran
    assert len(fake.calls) == 2
    outputs = [i for i in fake.calls[1].chat_ctx.items if i.type == "function_call_output"]
    assert [o.output for o in outputs] == ["mocked without parameters"]
    assert not error_logs.records


async def test_mock_declaring_the_run_context(make_session: MakeSession) -> None:
    seen: list[tuple[Any, Any]] = []

    def mock(ctx: Any, topic: Any) -> str:
        seen.append((ctx, topic))
        return "mocked"

    await research_turn(make_session, mock, arguments={"topic": "bees"})
    assert len(seen) == 1
    ctx, topic = seen[0]
    assert isinstance(ctx, RunContext) and ctx.function_call.name == "research"
    assert topic == "bees"


async def test_without_a_mock_the_real_tool_runs(make_session: MakeSession) -> None:
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("research", {"topic": "bees"})]), "Done."])
    session = await make_session(Researcher(), llm=fake)
    result: RunResult[Any] = await bounded(session.run(user_input="Research bees."), what="research turn")
    assert tool_output(result).output == REAL_OUTPUT


# -- our build only: the positional binding stock mocks rely on is kept, with a warning ------


@pytest.mark.fork_api
async def test_positional_fallback_warns_how_to_write_the_mock(make_session: MakeSession) -> None:
    """A mock not named like the tool's parameters still gets them by position (the guards in
    tests/guards/test_mock_tools_guard.py pin that), with a DeprecationWarning saying how to
    write it."""
    seen: list[Any] = []

    def mock(subject: Any) -> str:
        seen.append(subject)
        return "mocked"

    with pytest.warns(DeprecationWarning, match=r"the mock of tool `research`") as record:
        await research_turn(make_session, mock, arguments={"topic": "bees"})
    assert isinstance(seen[0], RunContext), seen  # stock's positional binding: the first argument
    messages = [str(w.message) for w in record if issubclass(w.category, DeprecationWarning)]
    assert len(messages) == 1, messages
    assert "by position" in messages[0] and "deprecated" in messages[0], messages[0]
    assert "like the tool's (ctx, topic, depth)" in messages[0], messages[0]
    assert "def mock(ctx)" in messages[0], messages[0]


@pytest.mark.fork_api
async def test_var_positional_fallback_warns(make_session: MakeSession) -> None:
    with pytest.warns(DeprecationWarning, match=r"takes \(\*args\) .* by position") as record:
        await research_turn(make_session, lambda *args: f"{len(args)}", arguments={"topic": "bees"})
    assert any("def mock(ctx, topic, depth)" in str(w.message) for w in record), [
        str(w.message) for w in record
    ]


@pytest.mark.fork_api
@pytest.mark.parametrize(
    "mock",
    [lambda topic: "mocked", lambda depth, topic: "mocked", lambda **kwargs: "mocked", lambda: "mocked"],
    ids=["topic", "depth-topic", "kwargs", "no-parameters"],
)
async def test_no_warning_for_mocks_named_like_the_tool(make_session: MakeSession, mock: Any) -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        await research_turn(make_session, mock, arguments={"topic": "bees"})
    assert not [w for w in record if issubclass(w.category, DeprecationWarning)], [
        str(w.message) for w in record
    ]
