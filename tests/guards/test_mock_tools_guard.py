"""Guards: ``mock_tools()`` mocks written for stock's positional binding keep working.

Stock 1.8.9 hands a mock the real call's arguments by position, trimmed to the number of
positional parameters the mock declares. Mocks written against that, whose parameters are
not named like the tool's, must still get the same arguments on our build (where a mock
naming the tool's parameters gets them by name: tests/regression/test_mock_tools.py):

* ``lambda loc: ...`` for a tool parameter ``location``; ``(context, subject)`` for a tool
  ``(ctx: RunContext, topic)``: the tool's arguments in the tool's order;
* ``lambda *args: ...``: stock passes it nothing (it counts only named positional parameters);
* a mock without parameters;
* a mock's return value (sync or async) is the tool's output; a ``ToolError`` it raises is
  the output the model gets, any other exception an internal error.

Our build also warns (DeprecationWarning) about the positional binding; these tests ignore
that warning (``test_mock_tools.py`` checks it), they pin what the mock receives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from livekit.agents import Agent, RunContext, RunResult, ToolError, function_tool, mock_tools
from livekit.agents.llm import FunctionCallOutput

from tests.fakes import ErrorLogCapture, MakeSession, Reply, ScriptedLLM, bounded, tool_call

pytestmark = pytest.mark.filterwarnings("ignore:the mock of tool:DeprecationWarning")

REAL_OUTPUT = "the real tool ran"


class Forecaster(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You tell the weather.")

    @function_tool
    async def get_weather(self, location: str) -> str:
        """Tell the weather.

        Args:
            location: where
        """
        return REAL_OUTPUT

    @function_tool
    async def research(self, ctx: RunContext, topic: str, depth: int = 1) -> str:
        """Research a topic.

        Args:
            topic: what to research
            depth: how deep to go
        """
        return REAL_OUTPUT


WEATHER_CALL = ("get_weather", {"location": "Paris"})


async def mocked_turn(
    make_session: MakeSession,
    mock: Callable[..., Any],
    *,
    call: tuple[str, dict[str, Any]] = WEATHER_CALL,
    form: str = "context",
) -> tuple[FunctionCallOutput, ScriptedLLM]:
    """One turn whose tool call runs ``mock``; the output recorded and the model's calls."""
    name, arguments = call
    fake = ScriptedLLM([Reply(tool_calls=[tool_call(name, arguments)]), "Here you are."])
    session = await make_session(Forecaster(), llm=fake)
    if form == "context":
        with mock_tools(Forecaster, {name: mock}):
            result: RunResult[Any] = await bounded(session.run(user_input="Go."), what="mocked turn")
    else:
        mock_tools(Forecaster, {name: mock}, session=session)
        try:
            result = await bounded(session.run(user_input="Go."), what="mocked turn")
        finally:
            mock_tools(Forecaster, {}, session=session)
    outputs = [ev.item for ev in result.events if ev.type == "function_call_output"]
    assert len(outputs) == 1, result.events
    # the model was asked again, with the mock's output
    assert len(fake.calls) == 2, fake.calls
    sent = [i for i in fake.calls[1].chat_ctx.items if i.type == "function_call_output"]
    assert [(o.output, o.is_error) for o in sent] == [(outputs[0].output, outputs[0].is_error)]
    return outputs[0], fake


@pytest.mark.parametrize("form", ["context", "session"])
async def test_mock_with_other_parameter_names_gets_the_arguments_by_position(
    make_session: MakeSession, error_logs: ErrorLogCapture, form: str
) -> None:
    seen: list[Any] = []

    def mock(loc: Any) -> str:
        seen.append(loc)
        return f"sunny in {loc}"

    out, _ = await mocked_turn(make_session, mock, form=form)
    assert seen == ["Paris"]
    assert not out.is_error and out.output == "sunny in Paris", out
    assert not error_logs.records


async def test_lambda_with_another_name(make_session: MakeSession, error_logs: ErrorLogCapture) -> None:
    out, _ = await mocked_turn(make_session, lambda loc: f"rainy in {loc}")
    assert not out.is_error and out.output == "rainy in Paris", out
    assert not error_logs.records


async def test_positional_mock_gets_the_run_context_first(
    make_session: MakeSession, error_logs: ErrorLogCapture
) -> None:
    seen: list[tuple[Any, Any]] = []

    def mock(context: Any, subject: Any) -> str:
        seen.append((context, subject))
        return f"mocked research on {subject}"

    out, _ = await mocked_turn(make_session, mock, call=("research", {"topic": "bees", "depth": 3}))
    assert len(seen) == 1
    context, subject = seen[0]
    assert isinstance(context, RunContext) and context.function_call.name == "research"
    assert subject == "bees"
    assert out.output == "mocked research on bees"
    assert not error_logs.records


async def test_var_positional_mock_is_called_without_arguments(
    make_session: MakeSession, error_logs: ErrorLogCapture
) -> None:
    seen: list[tuple[Any, ...]] = []

    def mock(*args: Any) -> str:
        seen.append(args)
        return "mocked with *args"

    out, _ = await mocked_turn(make_session, mock)
    assert seen == [()]
    assert not out.is_error and out.output == "mocked with *args", out
    assert not error_logs.records


async def test_lambda_var_positional(make_session: MakeSession, error_logs: ErrorLogCapture) -> None:
    out, _ = await mocked_turn(make_session, lambda *args: f"{len(args)} arguments")
    assert not out.is_error and out.output == "0 arguments", out
    assert not error_logs.records


async def test_mock_without_parameters(make_session: MakeSession, error_logs: ErrorLogCapture) -> None:
    calls: list[str] = []

    def mock() -> str:
        calls.append("called")
        return "always sunny"

    out, _ = await mocked_turn(make_session, mock)
    assert calls == ["called"]
    assert not out.is_error and out.output == "always sunny", out
    assert not error_logs.records


async def test_async_positional_mock_returns_its_value(
    make_session: MakeSession, error_logs: ErrorLogCapture
) -> None:
    async def mock(place: Any) -> dict[str, Any]:
        return {"place": place, "sky": "clear"}

    out, _ = await mocked_turn(make_session, mock)
    assert not out.is_error, out
    assert "Paris" in out.output and "clear" in out.output, out
    assert not error_logs.records


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_positional_mock_raising_a_tool_error(
    make_session: MakeSession, error_logs: ErrorLogCapture, is_async: bool
) -> None:
    def fail(loc: Any) -> str:
        raise ToolError(f"no forecast for {loc}")

    async def fail_async(loc: Any) -> str:
        raise ToolError(f"no forecast for {loc}")

    out, _ = await mocked_turn(make_session, fail_async if is_async else fail)
    assert out.is_error and out.output == "no forecast for Paris", out
    assert not error_logs.records


@pytest.mark.allow_error_logs(r"exception occurred while executing tool", expected=True)
async def test_positional_mock_raising_another_exception(make_session: MakeSession) -> None:
    def fail(loc: Any) -> str:
        raise RuntimeError(f"broken mock for {loc}")

    out, _ = await mocked_turn(make_session, fail)
    # the model is not told the details of an unexpected error
    assert out.is_error and out.output == "An internal error occurred", out
    assert "Paris" not in out.output
