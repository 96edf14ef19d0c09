"""Review of 0012: a tool that ends the call closes the session from inside itself.

0012 lets ``AgentActivity.aclose()`` and the tool executor leave out the current task and its
speech, for a tool whose inline task came back after the session moved on. A tool that ends
the call (``session.shutdown()``, or ``await session.aclose()``) is also closing its own
activity, from a task that copied the tool's context (and with it the tool's speech): the
session closes, the agent exits once, and no call reaches a closed realtime session. What the
caller hears is what upstream's ``shutdown(drain=...)`` promises: with ``drain`` the tool's result
is answered (the goodbye) before the close, without it the speech is interrupted and nothing is
said; either way the tool's result is in the history. ``aclose()`` closes without draining.
(``await session.aclose()`` inside the tool: tests/regression/test_review_aclose_from_a_tool.py)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession, CloseEvent, RunContext, function_tool

from tests import fakes
from tests.fakes import MODEL_KINDS, JournalingAgent, MakeSession, Reply, bounded, scripted_model, tool_call

DESK = "You are the desk."


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, how: str) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.how = how

    @function_tool
    async def end_call(self, ctx: RunContext) -> str:
        """End the call."""
        self.journal.events.append("end_call")
        if self.how == "shutdown":
            ctx.session.shutdown(drain=False)
        elif self.how == "shutdown-drain":
            ctx.session.shutdown()
        return "bye"


@pytest.mark.parametrize("how", ["shutdown", "shutdown-drain"])
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_a_tool_that_ends_the_call(make_session: MakeSession, kind: str, how: str) -> None:
    journal = fakes.Journal()
    model = scripted_model(kind, [Reply(tool_calls=[tool_call("end_call")])], fallback="Goodbye.")
    session: AgentSession[Any] = await make_session(Desk(journal, how), llm=model)
    closed: asyncio.Future[CloseEvent] = asyncio.get_running_loop().create_future()
    session.on("close", lambda ev: closed.done() or closed.set_result(ev))

    session.generate_reply(user_input="That's all, thanks.")
    ev = await bounded(closed, what="session close")

    assert ev.error is None
    assert journal.events.count("exit desk") == 1, journal.events
    await bounded(session.aclose(), what="AgentSession.aclose")
    assert fakes.late_calls(model) == []
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [(o.name, o.output) for o in outputs] == [("end_call", "bye")]
    assert fakes.spoken(session) == (["Goodbye."] if how == "shutdown-drain" else [])
