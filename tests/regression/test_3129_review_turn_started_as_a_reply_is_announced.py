"""livekit/agents#3129: a turn the caller starts as the leaving agent's own reply is announced is
answered by the agent taking over.

Realtime plugins announce every response they create, the ones the agent asked for too
(``generation_created`` with ``user_initiated=True``; the OpenAI plugin on ``response.created``,
Gemini Live as its reply starts). The desk's tool hands the caller to billing with a message:
the desk asks its model for the reply that voices it. The caller starts speaking while that
request is on its way (the server hears the speech start), the model's response to the request
is announced right after, then the caller ends the turn there, on the desk being handed over:
the server replies to it and transcribes it. Billing answers that turn, once; the desk answers
nothing after its on_exit began. Stock drops it (nobody answers).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import llm, utils

from tests.fakes import (
    Gate,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    spoken,
    tool_call,
)
from tests.fakes.desks import BILLING, DESK, SPOKEN, TO_BILLING, Desk, DeskJournal
from tests.fakes.history import user_messages
from tests.fakes.realtime import ScriptedRealtimeSession
from tests.fakes.session import settled_on


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str | None, str | None]] = []

    def answer(self, gen: RTGeneration) -> str:
        self.answers.append((gen.instructions, gen.last_user_text))
        return f"{gen.instructions} answers: {gen.last_user_text}"


class AnnouncingModel(ScriptedRealtimeModel):
    """Announces the responses the agent asks for (``generate_reply``) with ``generation_created``,
    as the realtime plugins do; the caller starts speaking as the desk's first one is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.speech_start_armed = True
        self.speech_started = asyncio.Event()

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = super().session(turn_detection_disabled=turn_detection_disabled)
        generate_reply = sess.generate_reply

        def announcing(**kwargs: Any) -> Any:
            fut = generate_reply(**kwargs)
            if self.speech_start_armed and sess.instructions == DESK:
                # the caller starts speaking as the desk's request goes out
                self.speech_start_armed = False
                sess.emit("input_speech_started", llm.InputSpeechStartedEvent())
                self.speech_started.set()
            if fut.done() and fut.exception() is None:
                sess.emit("generation_created", fut.result())
            return fut

        sess.generate_reply = announcing  # type: ignore[method-assign]
        return sess


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_a_turn_started_as_the_handoff_message_is_asked_for_is_answered_by_billing(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = AnnouncingModel(
        [Reply(tool_calls=[tool_call("to_billing")])],
        fallback=journal.answer,
        reuse=reuse,
        turn_detection=True,
        user_transcription=True,
    )
    session = await make_session(Desk(journal), llm=model)
    rt = model.sessions[-1]

    rt.simulate_user_turn(TO_BILLING)
    async with gate.held():
        await bounded(model.speech_started.wait(), what="the desk asking for the reply voicing its message")
        # the caller ends the turn they started: the server replies, then transcribes it
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        item_id = utils.shortuuid("fake_user_")
        rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)
        rt.emit_generation()
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
        )
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1, spoken(session)
    # the bug: nobody answers the turn
    assert [i for i, text in journal.answers if text == SPOKEN] == [BILLING], journal.answers
    assert spoken(session).count(f"{BILLING} answers: {SPOKEN}") == 1, spoken(session)
    assert not [t for t in spoken(session) if t.startswith(DESK) and SPOKEN in t], spoken(session)
