"""livekit/agents#3129: a turn the caller ends while the leaving agent's realtime session
closes, that session replaced (not handed on) in the handoff.

The caller speaks while the desk leaves: the desk's realtime session hears the whole turn (its
server heard the speech start and stop, and may have created its reply), and the handoff closes
that session before its transcript comes. Providers transcribe the caller asynchronously, so
the transcript is often a moment behind. A replaced session takes the audio it heard with it:
closed at once, the turn is lost (and with it the earlier turn the caller barged in on with it).
The agent the handoff ends with answers it, once.
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import llm, utils

from tests.fakes import Gate, MakeSession, RTGeneration, spoken
from tests.fakes.desks import BILLING, SPOKEN, TO_BILLING, Desk, DeskJournal, desk_realtime_model
from tests.fakes.session import settled_on

CLOSE_TICKS = 50
"""Loop ticks the leaving agent's session is given to close once the desk's on_exit returned
(it closes in a few without waiting for the transcript)."""


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        user_text = gen.last_user_text
        self.answers.append((gen.instructions, user_text))
        return f"{gen.instructions} answers: {user_text}"


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("reply_first", [True, False], ids=["reply-first", "transcript-first"])
async def test_a_turn_a_replaced_session_heard_end_is_answered_by_the_arriving_agent(
    make_session: MakeSession, reply_first: bool
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = desk_realtime_model(journal.answer, reuse=False)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    await gate.reached()
    item_id = utils.shortuuid("fake_user_")
    try:
        # the caller speaks a whole turn while the desk leaves: its session's server hears it
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
        if reply_first:
            rt.emit_generation()
    finally:
        gate.open()
    # the transcript comes a moment later: once the session closed, or CLOSE_TICKS into the
    # desk's close
    for _ in range(CLOSE_TICKS):
        if rt.closed:
            break
        await asyncio.sleep(0)
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
    )
    if not reply_first and not rt.closed:
        rt.emit_generation()
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)
    assert model.sessions[-1] is not rt, "the realtime session is replaced"

    # the bug: the transcript never reaches the history, nobody answers the turn
    assert sum(1 for i in session.history.items if i.type == "message" and i.text_content == SPOKEN) == 1
    assert [i for i, text in journal.answers if text == SPOKEN] == [BILLING]
    assert spoken(session).count(f"{BILLING} answers: {SPOKEN}") == 1
