"""livekit/agents#3129: a turn the realtime model's server detects during a handoff.

Providers that transcribe the caller asynchronously create their reply first and send the
transcript later, often after a short handoff is over. The rule (CONTRIBUTING.md, "Spoken
turns") does not care when the transcript comes: the turn is answered once, by the agent the
handoff ends with.
"""

from __future__ import annotations

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
from tests.fakes.desks import BILLING, DESK, SPOKEN, TO_BILLING, Desk, DeskJournal, desk_realtime_model
from tests.fakes.session import settled_on


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        user_text = gen.last_user_text
        self.answers.append((gen.instructions, user_text))
        return f"{gen.instructions} answers: {user_text}"


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_server_turn_whose_transcript_comes_after_the_handoff_is_answered(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = desk_realtime_model(journal.answer, reuse=True)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    await gate.reached()
    item_id = utils.shortuuid("fake_user_")
    try:
        # the caller goes on talking while the desk leaves: the server hears the turn and
        # creates its reply at once; the transcript is still being worked out
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
        rt.emit_generation()
    finally:
        gate.open()
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)
    assert model.sessions[-1] is rt, "the realtime session is handed on"

    # the transcript comes in now, on the session billing runs
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
    )
    await settled_on(session, billing)

    assert sum(1 for i in session.history.items if i.type == "message" and i.text_content == SPOKEN) == 1
    # the desk's reply was dropped: billing answers it, once
    assert [i for i, text in journal.answers if text == SPOKEN] == [BILLING]
    assert spoken(session).count(f"{BILLING} answers: {SPOKEN}") == 1


# -- a server-detected turn while an inline task starts --

FORM = "You collect the form."
OPEN_FORM = "I want to fill in the form."
OPENING = "Tell the caller you open the form."
OPENED = "Let me open the form for you."


class FormTask(fakes.JournalingTask[str]):
    pass


class FormDesk(JournalingAgent):
    journal: Journal

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        self.session.generate_reply(instructions=OPENING)
        result = await FormTask(self.journal, name="form", instructions=FORM)
        self.journal.results.append(result)
        return result


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_server_turn_ending_while_an_inline_task_starts_is_answered_by_the_task(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = Gate("desk pausing")

    def reply(gen: RTGeneration) -> Any:
        if gen.extra_instructions == OPENING:
            return Reply(OPENED, first_token_delay=gate.wait)
        return journal.answer(gen)

    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("open_form")])],
        fallback=reply,
        reuse=True,
        turn_detection=True,
        user_transcription=True,
    )
    session = await make_session(FormDesk(journal, name="desk", instructions=DESK), llm=model)

    model.sessions[-1].simulate_user_turn(OPEN_FORM)
    async with gate.held():
        # the desk still says it opens the form, its activity pausing for the task
        model.sessions[-1].simulate_user_turn(SPOKEN)
    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)
    await settled_on(session, task)

    assert sum(1 for i in session.history.items if i.type == "message" and i.text_content == SPOKEN) == 1
    # the bug: nobody answers; the turn is parked for an agent that never takes it
    queued = [type(a).__name__ for a, *_ in getattr(session, "_handoff_turns", [])]
    assert [i for i, text in journal.answers if text == SPOKEN] == [FORM], queued

    task.complete("form filled")
    await bounded(journal.exited["form"].wait(), what="the form's on_exit")
