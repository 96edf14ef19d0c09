"""livekit/agents#3129: a turn whose words a replaced session's server transcribed before it
reported the speech stop is answered by the agent taking over.

Nova Sonic reports the caller's turn as its words come in (the speech start with an interim
transcript: the caller's ASR text, sent once they stopped talking), and the speech stop with the
final transcript only as its reply starts. The caller ends a turn as the desk leaves; its server
sent the words, and the handoff closes its session before the reply (and with it the speech stop
and the final transcript) comes. The words are in: the caller is not still speaking, and the turn
is not lost with the session. Billing answers it, once. The scripted realtime model sends the
events the plugin's turn tracker does.
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import llm, utils

from tests.fakes import Gate, MakeSession, RTGeneration, spoken
from tests.fakes.desks import BILLING, SPOKEN, TO_BILLING, Desk, DeskJournal, desk_realtime_model
from tests.fakes.session import settled_on

CLOSE_TICKS = 50
"""Loop ticks the desk's session is given to close once its on_exit returned."""


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        self.answers.append((gen.instructions, gen.last_user_text))
        return f"{gen.instructions} answers: {gen.last_user_text}"


@pytest.mark.upstream_bug("livekit/agents#3129")
async def test_a_turn_whose_words_came_before_its_speech_stop_is_answered_by_billing(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = desk_realtime_model(journal.answer, reuse=False)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(TO_BILLING)

    item_id = utils.shortuuid("fake_user_")
    async with gate.held():
        # the caller's words, once they stopped talking: a speech start and an interim transcript
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=False),
        )
    for _ in range(CLOSE_TICKS):
        if rt.closed:
            break
        await asyncio.sleep(0)
    if not rt.closed:
        # the server's reply starts: the speech stop, the final transcript, the reply
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
        )
        rt.emit_generation()
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    users = [i.text_content for i in session.history.items if i.type == "message" and i.role == "user"]
    # the bug: the desk's session closes with the turn, nobody answers it
    assert users.count(SPOKEN) == 1, users
    assert [i for i, text in journal.answers if text == SPOKEN] == [BILLING], journal.answers
    assert spoken(session).count(f"{BILLING} answers: {SPOKEN}") == 1, spoken(session)
