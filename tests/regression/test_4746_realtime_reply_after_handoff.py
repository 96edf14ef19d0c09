"""livekit/agents#4746 (the part its early return was about): a realtime agent's reply
generated after the agent's realtime session was handed on.

The application hands the conversation to another agent (``session.update_agent()``, from
outside any tool) while a tool of the leaving agent is still running; the tool then awaits an
inline ``AgentTask``. Upstream refuses the task with a ToolError ("An agent transition is in
progress", livekit/agents#7268), as it must, but the drain of the leaving agent then no longer
waits for that tool: the handoff hands the realtime session to the arriving agent (or closes
it) under the tool, and the tool's reply runs on an activity without one. Stock 1.8.9 logs
``Error in _realtime_generation_task`` / ``Error in _realtime_reply_task``
(``'NoneType' object has no attribute 'capabilities'``, ``rt_session is not available``), or
sends the output to a closed session. The fork's drain waits for the refused tool and its
reply, as it does for any tool still running when a handoff starts.
"""

from __future__ import annotations

import pytest
from livekit.agents import AgentTask, function_tool, llm

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    late_calls,
    tool_call,
)

BUG = pytest.mark.upstream_bug("livekit/agents#4746")

DESK = "You are the front desk."
NEW_DESK = "You are the new front desk."
FORM = "You collect the form."
TRANSITION = "An agent transition is in progress"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.tool_gate = Gate("open_form")


class Desk(JournalingAgent):
    journal: Journal

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        await self.journal.tool_gate.wait()
        return await FormTask()


class FormTask(AgentTask[str]):
    """Completes itself as soon as it runs; it is never reached here."""

    def __init__(self) -> None:
        super().__init__(instructions=FORM)

    async def on_enter(self) -> None:
        self.complete("form filed")


def answer(gen: RTGeneration) -> str:
    return f"answer of {gen.instructions}"


def output_of(item: llm.ChatItem, name: str) -> bool:
    return item.type == "function_call_output" and item.name == name


# reused: mutable session state, the realtime session goes on to the arriving agent;
# replaced: the leaving agent's session is closed
@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_tool_refused_by_a_handoff_is_answered_before_the_session_moves_on(
    make_session: MakeSession, reuse: bool
) -> None:
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("open_form")])],
        fallback=answer,
        reuse=reuse,
    )
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=model)

    run = session.run(user_input="I need to fill in a form")
    await journal.tool_gate.reached()
    # the application moves the conversation on while the desk's tool runs
    new_desk = Desk(journal, name="new desk", instructions=NEW_DESK)
    session.update_agent(new_desk)
    await bounded(journal.exiting["desk"].wait(), what="the desk's on_exit")
    # the tool only now awaits its task: refused, the transition is under way
    journal.tool_gate.open()
    await bounded(run, what="session.run() across the handoff")
    await bounded(session.wait_for_idle(), what="the new desk idle")

    assert session.current_agent is new_desk
    assert journal.events == ["enter desk", "exit desk", "enter new desk"]
    [output] = [i for i in session.history.items if output_of(i, "open_form")]
    assert isinstance(output, llm.FunctionCallOutput)
    assert output.is_error and TRANSITION in output.output

    # the desk answers its own call, on its own realtime session, before that session moves
    # on; nothing is asked of a closed session
    desk_replies = [g for g in model.generations if g.agent is desk]
    assert desk_replies[-1].session is model.sessions[0]
    assert any(output_of(i, "open_form") for i in desk_replies[-1].chat_ctx.items)
    assert not late_calls(model)

    await bounded(session.run(user_input="hello"), what="session.run() after the handoff")
    assert model.generations[-1].agent is new_desk
    assert model.generations[-1].instructions == NEW_DESK
    assert journal.events == ["enter desk", "exit desk", "enter new desk"]
