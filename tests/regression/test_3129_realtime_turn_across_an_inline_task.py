"""livekit/agents#3129: a turn the caller starts as an agent pauses for an inline ``AgentTask``
and ends as the task hands back, the realtime session replaced at each step.

The desk's tool awaits the form. The caller starts speaking just as the desk pauses: its
realtime session, which heard the speech start, closes, and the rest of the audio goes to the
form's new session. The form completes; while it hands back, its session hears the speech stop
and creates its reply, and the transcript comes as that session closes. The turn is the desk's
to answer as it resumes on a session of its own. The desk must answer it, once: the speech start
its old session heard belongs to this same turn, not to a later one that would supersede its
reply (and the tool reply after the form).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import function_tool, llm, utils

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
OPEN_FORM = "I want to fill in the form."
SPOKEN = "and my name is Ada"
CLOSE_TICKS = 50
"""Loop ticks the form's session is given to close once its on_exit returned."""
PAUSE_TICKS = 50
"""Loop ticks the desk is given to start pausing for the form once its tool goes on."""


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.tool_gate = Gate("the desk's tool, before it awaits the form")
        self.form: FormTask | None = None
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        user_text = gen.last_user_text
        self.answers.append((gen.instructions, user_text))
        return f"{gen.instructions} answers: {user_text}"


class FormTask(fakes.JournalingTask[str]):
    pass


class Desk(JournalingAgent):
    journal: Journal

    @function_tool
    async def fill_form(self) -> Any:
        """Collect the caller's form."""
        await self.journal.tool_gate.wait()
        self.journal.form = FormTask(self.journal, name="form", instructions=FORM)
        return await self.journal.form


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_begun_as_the_agent_pauses_for_a_task_is_answered_as_it_resumes(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("fill_form")])],
        fallback=journal.answer,
        reuse=False,
        turn_detection=True,
        user_transcription=True,
    )
    desk = Desk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=model)
    desk_rt = model.sessions[-1]

    desk_rt.simulate_user_turn(OPEN_FORM)
    await journal.tool_gate.reached()
    journal.tool_gate.open()
    # once the desk's speech that called the tool, held for the form, is no longer current
    for _ in range(PAUSE_TICKS):
        if journal.form is not None and session.current_speech is None:
            break
        await asyncio.sleep(0)
    else:
        pytest.fail("the desk did not start pausing for the form")
    # the caller starts speaking as the desk pauses for the form: its session hears the start
    assert not desk_rt.closed
    desk_rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    await bounded(journal.entered["form"].wait())
    form_rt = model.sessions[-1]
    assert form_rt is not desk_rt and desk_rt.closed, "the desk's session is replaced"
    # the rest of the caller's audio goes to the form's session
    form_rt.emit("input_speech_started", llm.InputSpeechStartedEvent())

    gate = journal.exit_gates["form"] = Gate("form on_exit")
    assert journal.form is not None
    journal.form.complete("filled")
    await gate.reached()
    item_id = utils.shortuuid("fake_user_")
    try:
        # the caller stops while the form hands back; its server creates its reply first
        form_rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        form_rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
        form_rt.emit_generation()
    finally:
        gate.open()
    for _ in range(CLOSE_TICKS):
        if form_rt.closed:
            break
        await asyncio.sleep(0)
    form_rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
    )
    await settled_on(session, desk)
    assert model.sessions[-1] not in (desk_rt, form_rt), "the desk resumes on a session of its own"

    # the bug: the turn is lost with the form's session; or the desk takes it over, but reads
    # its old session's speech start as a later turn's and supersedes its own reply to it
    assert sum(1 for i in session.history.items if i.type == "message" and i.text_content == SPOKEN) == 1
    assert spoken(session).count(f"{DESK} answers: {SPOKEN}") == 1, spoken(session)
