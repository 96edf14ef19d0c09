"""Review of 0005: handing back to an agent whose ``on_enter`` awaits the inline task.

The inline task is awaited in the agent's ``on_enter`` (a consent form first thing), not in
a tool. A tool of the task hands back to that agent, by returning it or by
``session.update_agent()``. The agent resumes, its ``on_enter`` gets the ToolError that says
the task was handed back (there is no call to answer), it enters only once, and it answers the
user's next turn. On 1.8.9 "cannot start agent: an activity is already running" is logged and
the task keeps answering.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, ToolError, function_tool

from tests import fakes
from tests.fakes import (
    JournalingAgent,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    late_calls,
    scripted_model,
    tool_call,
)
from tests.fakes.llm import LLMCall
from tests.fakes.realtime import MODEL_KINDS, RTGeneration

DESK = "You are the front desk."
FORM = "You collect the consent form."


class FormTask(fakes.JournalingTask[str]):
    def __init__(self, journal: fakes.Journal, desk: Agent) -> None:
        super().__init__(journal, name="form", instructions=FORM)
        self.desk = desk

    @function_tool
    async def back_to_desk(self) -> Agent:
        """Go back to the front desk."""
        return self.desk

    @function_tool
    async def back_by_update_agent(self) -> str:
        """Go back to the front desk."""
        self.session.update_agent(self.desk)
        return "Going back to the desk"


class Desk(JournalingAgent):
    async def on_enter(self) -> None:
        await super().on_enter()
        try:
            self.journal.results.append(await FormTask(self.journal, self))
        except ToolError as e:
            self.journal.results.append(e)


def answer(request: LLMCall | RTGeneration) -> str:
    return f"answer of {request.instructions}"


@pytest.mark.upstream_bug("livekit/agents#4746")
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("how", ["back_to_desk", "back_by_update_agent"])
async def test_handing_back_to_an_on_enter_awaiting_the_task(
    make_session: MakeSession, kind: str, how: str
) -> None:
    journal = fakes.Journal()
    model = scripted_model(kind, [Reply(tool_calls=[tool_call(how)])], fallback=answer)
    desk = Desk(journal, name="desk", instructions=DESK)
    session: AgentSession[Any] = await make_session(desk, llm=model)
    await bounded(journal.entered["form"].wait(), what="the form's on_enter")

    await bounded(session.run(user_input="take me back to the desk"), what="session.run() handing back")
    await bounded(session.wait_for_idle(), what="idle")

    assert session.current_agent is desk
    assert journal.events == ["enter desk", "enter form", "exit form"]
    [error] = journal.results
    assert isinstance(error, ToolError) and "handed back" in error.message, error

    await bounded(session.run(user_input="thanks"), what="session.run() after handing back")
    reqs = list(model.calls) if isinstance(model, ScriptedLLM) else list(model.generations)
    assert reqs[-1].instructions == DESK, [r.instructions for r in reqs]
    assert fakes.spoken(session)[-1] == f"answer of {DESK}"
    await bounded(session.aclose(), what="AgentSession.aclose")
    assert journal.events == ["enter desk", "enter form", "exit form", "exit desk"]
    assert not late_calls(model)
