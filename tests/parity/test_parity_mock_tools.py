"""Parity: ``mock_tools()`` next to patch 0003 (``_run_mock`` binding by name).

The mocks stock 1.8.9 already serves right must keep working: one that declares every
parameter of the real tool in its order, one that declares none, an async one, one declaring
a leading prefix (``ctx`` only), one that raises ``ToolError``, and one that returns an Agent
(a mocked handoff), in both public forms of ``mock_tools`` (context manager, ``session=``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from livekit.agents import RunContext, ToolError, function_tool, mock_tools

from tests import fakes
from tests.fakes import JournalingAgent, MakeSession, Reply, ScriptedLLM, bounded, tool_call
from tests.parity._support import assert_every_call_answered

RESEARCHER = "You are the research agent."
LIBRARIAN = "You are the librarian."


class Librarian(JournalingAgent):
    def __init__(self, journal: fakes.Journal) -> None:
        super().__init__(journal, name="librarian", instructions=LIBRARIAN)


class Researcher(JournalingAgent):
    def __init__(self, journal: fakes.Journal) -> None:
        super().__init__(journal, name="researcher", instructions=RESEARCHER)

    @function_tool
    async def research(self, ctx: RunContext, topic: str, depth: int = 1) -> Any:
        """Research a topic.

        Args:
            topic: what to research
            depth: how deep to go
        """
        return "the real research tool ran"


async def _async_mock(ctx: RunContext, topic: str, depth: int = 1) -> str:
    return f"async mock: {topic}/{depth}/{type(ctx).__name__}"


def _raising_mock() -> str:
    raise ToolError("the library is closed")


MOCKS: dict[str, tuple[Callable[..., Any], str, bool]] = {
    # name: (mock, expected output, is_error)
    "all-params": (
        lambda ctx, topic, depth: f"mock: {topic}/{depth}/{type(ctx).__name__}",
        "mock: cats/2/RunContext",
        False,
    ),
    "no-params": (lambda: "mock: canned", "mock: canned", False),
    "async": (_async_mock, "async mock: cats/2/RunContext", False),
    "ctx-only": (lambda ctx: f"mock: {type(ctx).__name__}", "mock: RunContext", False),
    "tool-error": (_raising_mock, "the library is closed", True),
}


@pytest.mark.parametrize("form", ["context", "session"])
@pytest.mark.parametrize("case", list(MOCKS))
async def test_mock_replaces_the_tool(make_session: MakeSession, case: str, form: str) -> None:
    mock, expected, is_error = MOCKS[case]
    journal = fakes.Journal()
    fake = ScriptedLLM(
        [Reply(tool_calls=[tool_call("research", {"topic": "cats", "depth": 2})]), "Here it is."]
    )
    session = await make_session(Researcher(journal), llm=fake)
    if form == "context":
        with mock_tools(Researcher, {"research": mock}):
            await bounded(session.run(user_input="research cats"), what="mocked run")
    else:
        mock_tools(Researcher, {"research": mock}, session=session)
        await bounded(session.run(user_input="research cats"), what="mocked run")

    assert_every_call_answered(session)
    out = next(i for i in session.history.items if i.type == "function_call_output")
    assert (out.output, out.is_error) == (expected, is_error)
    # the model answered the mocked output, with the real tool's schema offered
    assert "research" in fake.calls[0].tools and len(fake.calls) == 2
    assert any(
        i.type == "function_call_output" and i.output == expected for i in fake.calls[1].chat_ctx.items
    )


@pytest.mark.parametrize("form", ["context", "session"])
async def test_mock_returning_an_agent_hands_off(make_session: MakeSession, form: str) -> None:
    journal = fakes.Journal()
    librarian = Librarian(journal)
    fake = ScriptedLLM(
        [Reply(tool_calls=[tool_call("research", {"topic": "cats"})])],
        fallback=lambda call: "Librarian here." if call.instructions == LIBRARIAN else "",
    )
    session = await make_session(Researcher(journal), llm=fake)
    mock = lambda topic: librarian  # noqa: E731
    if form == "context":
        with mock_tools(Researcher, {"research": mock}):
            await bounded(session.run(user_input="research cats"), what="mocked handoff run")
    else:
        mock_tools(Researcher, {"research": mock}, session=session)
        await bounded(session.run(user_input="research cats"), what="mocked handoff run")

    assert session.current_agent is librarian
    assert journal.events == ["enter researcher", "exit researcher", "enter librarian"]
    await bounded(session.run(user_input="hello"), what="next turn")
    assert fake.calls[-1].instructions == LIBRARIAN
    assert_every_call_answered(session)
