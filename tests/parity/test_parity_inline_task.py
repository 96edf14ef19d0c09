"""Parity: an inline ``AgentTask`` awaited in a tool, and async tools on realtime models,
next to patches 0005, 0007, 0010, 0012 and 0013 (``AgentTask.__await_impl``, the realtime
generation task's tail, ``_ToolExecutor.cancel_all``).

Stock 1.8.9 gets these right on the pipeline LLM and on realtime sessions reused and replaced:
the task takes over, completes from its own tool, the agent that awaited it resumes (no second
``on_enter``), its tool returns the task's result, the agent answers it, and the next turn is
the agent's again. An async tool's progress update and final return are both recorded and
voiced. ``aclose()`` while a task waits for the user ends it without hanging.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import RunContext, function_tool

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    JournalingTask,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    scripted_model,
    spoken,
    tool_call,
    wait_for_event,
)
from tests.parity._support import assert_every_call_answered, transcript

KINDS = pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced"])
DESK, FORM = "You are the desk.", "You collect the email."


class EmailTask(JournalingTask[str]):
    def __init__(self, journal: fakes.Journal) -> None:
        super().__init__(journal, name="form", instructions=FORM)

    @function_tool
    async def record_email(self, email: str) -> None:
        """Record the email."""
        self.complete(email)


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, gate: Gate | None = None) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.gate = gate
        self.results: list[Any] = []

    @function_tool
    async def collect_email(self) -> str:
        """Collect the caller's email."""
        try:
            email = await EmailTask(self.journal)
        except Exception as e:
            self.results.append(e)
            raise
        self.results.append(email)
        return f"email is {email}"

    @function_tool
    async def track(self, ctx: RunContext) -> str:
        """Track the parcel."""
        await ctx.update("tracking the parcel")
        assert self.gate is not None
        await self.gate.wait()
        return "parcel delivered"


def by_agent(call: Any) -> str:
    return {DESK: "Desk here.", FORM: "What is your email?"}.get(call.instructions or "", "")


@KINDS
async def test_task_awaited_in_a_tool_hands_back_with_its_result(
    make_session: MakeSession, kind: str
) -> None:
    journal = fakes.Journal()
    desk = Desk(journal)
    model = scripted_model(
        kind,
        [
            Reply(tool_calls=[tool_call("collect_email")]),
            Reply(tool_calls=[tool_call("record_email", {"email": "ada@example.com"})]),
        ],
        fallback=by_agent,
    )
    session = await make_session(desk, llm=model)
    await bounded(session.run(user_input="take my email"), what="task run")
    assert isinstance(session.current_agent, EmailTask)

    await bounded(session.run(user_input="ada@example.com"), what="email run")
    assert session.current_agent is desk
    assert desk.results == ["ada@example.com"]
    assert journal.events == ["enter desk", "enter form", "exit form"]
    assert_every_call_answered(session)
    out = next(
        i for i in session.history.items if i.type == "function_call_output" and i.name == "collect_email"
    )
    assert out.output == "email is ada@example.com"
    assert spoken(session)[-1] == "Desk here."

    await bounded(session.run(user_input="thanks"), what="next turn")
    assert session.current_agent is desk and spoken(session)[-1] == "Desk here."


@KINDS
async def test_close_while_a_task_waits_for_the_user(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    desk = Desk(journal)
    model = scripted_model(kind, [Reply(tool_calls=[tool_call("collect_email")])], fallback=by_agent)
    session = await make_session(desk, llm=model)
    await bounded(session.run(user_input="take my email"), what="task run")
    assert isinstance(session.current_agent, EmailTask)

    await bounded(session.aclose(), what="aclose() with a task waiting")
    assert journal.events[:2] == ["enter desk", "enter form"]
    assert journal.events.count("exit form") == 1
    # the tool awaiting the task was ended, not left waiting
    assert len(desk.results) == 1 and isinstance(desk.results[0], BaseException), desk.results


@KINDS
async def test_async_tool_update_then_final_is_voiced(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    gate = Gate("track")
    desk = Desk(journal, gate)
    call = tool_call("track")
    model = scripted_model(kind, [Reply(tool_calls=[call]), "Tracking it now.", "It was delivered."])
    session = await make_session(desk, llm=model)
    await bounded(session.run(user_input="where is my parcel?"), what="update run")
    assert spoken(session) == ["Tracking it now."], transcript(session)

    ended = asyncio.ensure_future(
        wait_for_event(
            session,
            "tool_execution_updated",
            lambda ev: (
                ev.update.type == "tool_reply_updated"
                and f"{call.call_id}_final" in ev.update.update_ids
                and ev.update.status != "scheduled"
            ),
        )
    )
    gate.open()
    assert (await bounded(ended, what="the reply to the final return")).update.status == "completed"
    assert spoken(session) == ["Tracking it now.", "It was delivered."], transcript(session)
    outputs = {i.call_id: i.output for i in session.history.items if i.type == "function_call_output"}
    assert outputs[f"{call.call_id}_final"] == "parcel delivered"
    assert_every_call_answered(session)
    assert not isinstance(model, ScriptedLLM) or model.calls[-1].tool_choice is None
