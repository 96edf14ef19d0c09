"""A tool returns an agent the session cannot hand off to: one already running elsewhere.

Stock 1.8.9 takes the handoff: ``update_agent()`` points ``current_agent`` at that agent,
blocks the desk's new turns, and only its update task finds the agent already running
("cannot start agent: an activity is already running", at ERROR). The desk keeps running
but ``current_agent`` names an agent this session never runs. The fork refuses the handoff
before anything changes, and the call that returned the agent answers the model with why,
so nothing the tool did is lost and the model can recover.
"""

from __future__ import annotations

import pytest
from livekit.agents import Agent, function_tool

from tests import fakes
from tests.fakes import (
    MODEL_KINDS,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    bounded,
    scripted_model,
    tool_call,
)

BUG = pytest.mark.upstream_bug("livekit/agents#4746")

DESK = "You are the desk."
CALL_ID = "call_transfer"


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, *, elsewhere: Agent | None = None, name: str = "desk") -> None:
        super().__init__(journal, name=name, instructions=DESK)
        self.elsewhere = elsewhere

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer the caller."""
        assert self.elsewhere is not None
        return self.elsewhere


def answer(call: LLMCall | RTGeneration) -> str:
    return "Desk here."


@BUG
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_a_refused_handoff_answers_the_call(make_session: MakeSession, kind: str) -> None:
    elsewhere = Desk(fakes.Journal(), name="elsewhere")
    other = await make_session(elsewhere, llm=ScriptedLLM(fallback=answer))
    journal = fakes.Journal()
    desk = Desk(journal, elsewhere=elsewhere)
    model = scripted_model(
        kind, [Reply(tool_calls=[tool_call("transfer", call_id=CALL_ID)])], fallback=answer
    )
    session = await make_session(desk, llm=model)

    await bounded(session.run(user_input="Put me through."), what="the turn that hands off")

    # nothing changed: the desk still runs, and the session says so
    assert session.current_agent is desk, "current_agent names an agent this session never runs"
    assert other.current_agent is elsewhere
    assert journal.events == ["enter desk"]
    # the call reached the context with an output telling the model why
    calls = [i for i in session.history.items if i.type == "function_call" and i.call_id == CALL_ID]
    outs = [i for i in session.history.items if i.type == "function_call_output" and i.call_id == CALL_ID]
    assert len(calls) == 1 and len(outs) == 1, session.history.items
    assert outs[0].is_error and "already running" in outs[0].output, outs[0]

    # and the desk answers the next turn
    await bounded(session.run(user_input="hello"), what="the next turn")
    assert journal.events == ["enter desk"]
