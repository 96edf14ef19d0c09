"""Parity: a tool returns an agent that already runs, next to patch 0005's check in
``AgentSession.update_agent()`` (``_inline_tasks_ended_by``).

Stock 1.8.9 restarts the current agent when a tool returns it (``return self``), and when an
inline ``AgentTask`` returns itself; the fork does the same. An agent that runs elsewhere (in
another session) cannot start: stock logs "cannot start agent" from the update task, but the
call and its output are already recorded, sent to a realtime model, and the agent keeps
answering. The fork raises from ``update_agent()`` inside the reply task instead, before the
batch is recorded: on the pipeline the call and its output never reach the history, and on
a realtime model the output never reaches the model.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, RunContext, function_tool

from tests import fakes
from tests.fakes import (
    MODEL_KINDS,
    JournalingAgent,
    JournalingTask,
    MakeSession,
    Reply,
    ScriptedRealtimeModel,
    bounded,
    scripted_model,
    spoken,
    tool_call,
)
from tests.parity._support import assert_every_call_answered, transcript

DESK = "You are the desk."
FORM = "You fill in the form."
DESK_REPLY = "Desk here."
KINDS = pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced"])


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, elsewhere: Agent | None = None) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.elsewhere = elsewhere
        self.form: Form | None = None

    @function_tool
    async def restart(self) -> Agent:
        """Start over with the same agent."""
        return self

    @function_tool
    async def restart_later(self, ctx: RunContext) -> Agent:
        """Start over with the same agent, after a check."""
        await ctx.update("checking")
        return self

    @function_tool
    async def open_form(self) -> str:
        """Open the form."""
        self.form = Form(self.journal)
        return f"form says {await self.form}"

    @function_tool
    async def to_elsewhere(self) -> Agent:
        """Go to the agent of the other line."""
        assert self.elsewhere is not None
        return self.elsewhere


class Form(JournalingTask[str]):
    def __init__(self, journal: fakes.Journal) -> None:
        super().__init__(journal, name="form", instructions=FORM)

    @function_tool
    async def start_over(self) -> Agent:
        """Start the form over."""
        return self

    @function_tool
    async def finish(self) -> None:
        """Finish the form."""
        self.complete("done")


def by_agent(call: Any) -> str:
    return {DESK: DESK_REPLY, FORM: "Form here."}.get(call.instructions or "", "")


@KINDS
async def test_tool_returning_its_own_agent_restarts_it(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    model = scripted_model(kind, [Reply(tool_calls=[tool_call("restart")])], fallback=by_agent)
    desk = Desk(journal)
    session = await make_session(desk, llm=model)
    await bounded(session.run(user_input="start over"), what="restart run")
    assert session.current_agent is desk
    assert journal.events == ["enter desk", "exit desk", "enter desk"]
    await bounded(session.run(user_input="hello"), what="next turn")
    assert_every_call_answered(session)
    assert spoken(session)[-1] == DESK_REPLY


@KINDS
@pytest.mark.allow_error_logs(r"returned an Agent after ctx\.update\(\)")  # stock drops it
async def test_async_tool_returning_its_own_agent_loses_nothing(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    call = tool_call("restart_later")
    model = scripted_model(kind, [Reply(tool_calls=[call])], fallback=by_agent)
    desk = Desk(journal)
    session = await make_session(desk, llm=model)
    await bounded(session.run(user_input="start over"), what="restart run")
    await bounded(session.run(user_input="hello"), what="next turn")
    assert session.current_agent is desk
    assert_every_call_answered(session)
    outputs = [i.call_id for i in session.history.items if i.type == "function_call_output"]
    assert f"{call.call_id}_final" in outputs, transcript(session)
    assert spoken(session)[-1] == DESK_REPLY
    assert journal.events[-1] == "enter desk"


@KINDS
async def test_inline_task_returning_itself_still_hands_back(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    open_form = tool_call("open_form")
    model = scripted_model(
        kind,
        [
            Reply(tool_calls=[open_form]),
            Reply(tool_calls=[tool_call("start_over")]),
            Reply(tool_calls=[tool_call("finish")]),
        ],
        fallback=by_agent,
    )
    desk = Desk(journal)
    session = await make_session(desk, llm=model)
    await bounded(session.run(user_input="open the form"), what="form run")
    await bounded(session.run(user_input="start the form over"), what="start over run")
    assert session.current_agent is desk.form
    await bounded(session.run(user_input="I'm done"), what="finish run")

    assert session.current_agent is desk
    assert journal.events == ["enter desk", "enter form", "exit form", "enter form", "exit form"]
    assert_every_call_answered(session)
    out = next(
        i
        for i in session.history.items
        if i.type == "function_call_output" and i.call_id == open_form.call_id
    )
    assert out.output == "form says done" and not out.is_error
    assert spoken(session)[-1] == DESK_REPLY


@pytest.mark.allow_error_logs(r"an activity is already running", r"Task exception was never retrieved")
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_handoff_to_an_agent_running_elsewhere_loses_nothing(
    make_session: MakeSession, kind: str
) -> None:
    journal = fakes.Journal()
    elsewhere = JournalingAgent(journal, name="elsewhere", instructions="You are on the other line.")
    await make_session(elsewhere, llm=scripted_model(kind, fallback="other line"))
    call = tool_call("to_elsewhere")
    model = scripted_model(kind, [Reply(tool_calls=[call])], fallback=by_agent)
    desk = Desk(journal, elsewhere)
    session = await make_session(desk, llm=model)

    await bounded(session.run(user_input="put me through"), what="refused handoff run")
    await bounded(session.run(user_input="hello?"), what="next turn")

    # the call and its output are in the history, the model got the output, the desk answers
    assert_every_call_answered(session)
    assert call.call_id in [i.call_id for i in session.history.items if i.type == "function_call"], (
        transcript(session)
    )
    if isinstance(model, ScriptedRealtimeModel):
        pushed = [n for e in model.calls("update_chat_ctx") for n in e.args["new_function_outputs"]]
        assert "to_elsewhere" in pushed, model.journal
    assert spoken(session)[-1] == DESK_REPLY
    assert journal.events[:2] == ["enter elsewhere", "enter desk"] and "exit desk" not in journal.events
