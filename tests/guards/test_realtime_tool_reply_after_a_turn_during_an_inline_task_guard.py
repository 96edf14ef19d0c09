"""A turn the caller speaks as an inline AgentTask hands back is answered at most once
(livekit/agents#3129, "Spoken turns" in CONTRIBUTING.md).

The desk answers a turn with a tool call that awaits the form task (realtime session reused, no
automatic tool replies). The form completes, and the caller speaks again right after its
on_exit, before the desk asked its model for the reply to the tool's output. The speech that
called the tool is not playing (its generation ended with the call) and held its
interruptions while the task ran, so the caller's speech start does not cut it as it cuts a
speech whose plain tools run. The server answers the caller's turn itself; the reply to the
tool's output, asked for after that turn began, would answer it a second time (a model answers
the newest turn of its context). Parity: stock passes; the fork failed it before the caller's
later turn superseded the tool reply (``AgentActivity._realtime_reply_task()``).
"""

from __future__ import annotations

from typing import Any

from livekit.agents import RunContext, function_tool

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    spoken,
    tool_call,
)
from tests.fakes.session import settled_on

DESK = "You are the front desk."
FORM = "You collect the form."
FORM_PLEASE = "I need the refund form."
SPOKEN = "It's for last month."


def _answer(gen: RTGeneration) -> str:
    users = [i for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
    return f"answers: {users[-1].text_content if users else None}"


class FormTask(fakes.JournalingTask[str]):
    def __init__(self, journal: fakes.Journal, gate: Gate) -> None:
        super().__init__(journal, name="form", instructions=FORM)
        self.gate = gate

    async def on_enter(self) -> None:
        await super().on_enter()
        await self.gate.wait()
        self.complete("form filled")


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, gate: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.gate = gate
        self.tool_speech: Any = None

    @function_tool
    async def fill_form(self, ctx: RunContext) -> str:
        """Fill the refund form in with the caller."""
        self.tool_speech = ctx.speech_handle
        return await FormTask(self.journal, self.gate)


async def test_a_turn_spoken_as_an_inline_task_hands_back_is_answered_once(
    make_session: MakeSession,
) -> None:
    journal = fakes.Journal()
    gate = Gate("the form completing")
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("fill_form")])],
        fallback=_answer,
        reuse=True,
        turn_detection=True,
        user_transcription=True,
    )
    desk = Desk(journal, gate)
    session: Any = await make_session(desk, llm=model)

    model.sessions[-1].simulate_user_turn(FORM_PLEASE)
    await gate.reached()
    gate.open()
    await bounded(journal.exited["form"].wait(), what="the form's on_exit")
    # the caller goes on as the form hands back, before the desk's model had the form's result
    model.sessions[-1].simulate_user_turn(SPOKEN, respond=False)
    await bounded(desk.tool_speech.wait_for_playout(), what="the desk's reply to the form's result")
    # the server's own reply to the caller's turn
    model.sessions[-1].emit_generation()
    await settled_on(session, desk)

    said = [i for i in session.history.items if i.type == "message" and i.text_content == SPOKEN]
    assert len(said) == 1, f"{SPOKEN!r} is in {len(said)} user messages of the history"
    answers = [t for t in spoken(session) if t == f"answers: {SPOKEN}"]
    assert len(answers) <= 1, f"the caller's turn is answered {len(answers)} times: {spoken(session)}"
