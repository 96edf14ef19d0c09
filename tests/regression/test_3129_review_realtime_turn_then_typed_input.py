"""livekit/agents#3129: a realtime turn whose transcript comes late keeps its place before input
typed after it.

The caller speaks while the desk leaves, on a realtime model whose server detects the turns: the
server hears the turn end and replies to it (skipped: the desk is being handed over), and its
transcript comes a moment later. In between, the application sends typed input. The caller said
the turn first: billing answers it first, then the typed input, each once. The turn is handed
over only as its transcript comes in, after the typed input was queued: it must still go before
it. Stock drops the spoken turn (nobody answers it).
"""

from __future__ import annotations

import pytest
from livekit.agents import llm, utils

from tests.fakes import (
    Gate,
    MakeSession,
    RTGeneration,
    bounded,
    spoken,
)
from tests.fakes.desks import BILLING, SPOKEN, TO_BILLING, Desk, DeskJournal, desk_realtime_model
from tests.fakes.session import settled_on

TYPED = "My order number is 1234."


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        self.answers.append((gen.instructions, gen.last_user_text))
        return f"{gen.instructions} answers: {gen.last_user_text}"


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_a_turn_transcribed_after_typed_input_is_answered_before_it(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = desk_realtime_model(journal.answer, reuse=reuse)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(TO_BILLING)

    async with gate.held():
        # the caller's turn ends as the desk leaves: the server replies to it at once ...
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        item_id = utils.shortuuid("fake_user_")
        rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
        rt.emit_generation()
        # ... the application sends typed input, then the turn's transcript comes in
        try:
            typed = session.generate_reply(user_input=TYPED)
        except RuntimeError:
            typed = None  # stock refuses input once the desk drains (livekit/agents#6313)
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
        )
    if typed is not None:
        await bounded(typed, what="the answer to the typed input")
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    # stock: nobody answers the spoken turn
    assert [i for i, text in journal.answers if text == SPOKEN] == [BILLING], journal.answers
    assert typed is not None, "the typed input was refused"
    users = [i.text_content for i in session.history.items if i.type == "message" and i.role == "user"]
    assert users == [TO_BILLING, SPOKEN, TYPED], users
    # the bug (fork): the typed input, given after the turn, is answered first
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [
        f"{BILLING} answers: {SPOKEN}",
        f"{BILLING} answers: {TYPED}",
    ]
