"""Parity around the spoken-turn hand-over: what stock 1.8.9 does right stays so on the fork.

* **A turn the server hears during a handoff whose transcript never comes.** A realtime model
  with server-side turn detection hears a noise (or a turn its transcription failed on) while
  the leaving agent is in its ``on_exit()``, and replies before any transcript; none ever
  comes. The next turn, long after the arriving agent runs, is an ordinary turn: the model
  answers it once, as on stock.
"""

from __future__ import annotations

from livekit.agents import llm

from tests.fakes import (
    Gate,
    MakeSession,
    RTGeneration,
    spoken,
)
from tests.fakes.desks import BILLING, TO_BILLING, Desk, DeskJournal, desk_realtime_model
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

LATER = "What is my balance?"


class Journal(DeskJournal):
    def answer(self, gen: RTGeneration) -> str:
        return f"{gen.instructions} answers: {gen.last_user_text}"


async def test_a_turn_after_a_handoff_whose_server_turn_had_no_transcript_is_answered_once(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = desk_realtime_model(journal.answer, reuse=True)
    session = await make_session(Desk(journal, message=None), llm=model)

    model.sessions[-1].simulate_user_turn(TO_BILLING)
    async with gate.held():
        # the server hears a noise as the desk leaves, and replies; no transcript ever comes
        rt = model.sessions[-1]
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        rt.emit_generation()
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    # long after the handoff, an ordinary turn
    model.sessions[-1].simulate_user_turn(LATER)
    await settled_on(session, billing)

    assert user_messages(session, LATER) == 1
    assert spoken(session).count(f"{BILLING} answers: {LATER}") == 1, spoken(session)
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
