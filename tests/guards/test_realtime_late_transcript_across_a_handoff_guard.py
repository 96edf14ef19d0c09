"""Guards: a realtime turn whose reply came before its transcript, during a handoff, and whose
transcript comes once the caller went on (pass on stock 1.8.9 and on the fork).

The desk hands the caller to billing; its realtime session is handed on. While the desk leaves,
the model's server detects the caller's first turn and the model creates its reply before the
transcript is in (the desk skips it: billing answers the turn once its transcript comes). The
caller then speaks again, a turn billing answers, and only then the first turn's transcript
comes in. The caller went on before any answer to the first turn played: it is superseded
(CONTRIBUTING.md, "Spoken turns"). It is recorded once, answered by nothing of its own; the
model answers the later turn with it in its context, and no answer to it plays after the later
turn's. Stock gets this right (it never answers a turn whose reply it skipped); the fork's
routing of a late transcript to the agent taking over (``_rt_turn_awaiting_transcript``) must
not answer the first turn after the caller went on, nor ask the model for an answer to a turn
it took once the model replied to a later one (the last test: the transcript comes just before
the caller's next turn ends).
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import AgentSession, llm, utils

from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    bounded,
    spoken,
)
from tests.fakes.desks import BILLING, TO_BILLING, Desk, DeskJournal, desk_realtime_model
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

FIRST = "I was charged twice."
SECOND = "Actually, it's about a refund."


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[tuple[str | None, list[str]]] = []

    def answer(self, gen: RTGeneration) -> Reply:
        """The model's fallback: answers the last user message of its context."""
        users = [i.text_content or "" for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
        self.answers.append((gen.instructions, users))
        return Reply(f"{gen.instructions} answers: {users[-1] if users else None}")

    def context_of_answers_to(self, text: str) -> list[list[str]]:
        return [users for _, users in self.answers if users and users[-1] == text]


def _model(journal: Journal) -> ScriptedRealtimeModel:
    return desk_realtime_model(journal.answer, reuse=True)


def _reply_first(rt: ScriptedRealtimeSession, text: str, *, item_added: bool) -> str:
    """The server detects a turn of the caller's and the model creates its reply before the
    transcript is in; with ``item_added`` the model already holds the turn's item. Returns
    the item id the transcript comes with (:func:`_transcribed`)."""
    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    item_id = utils.shortuuid("fake_user_")
    if item_added:
        rt._chat_ctx.add_message(role="user", content=text, id=item_id)
    rt.emit_generation()
    return item_id


def _transcribed(rt: ScriptedRealtimeSession, item_id: str, text: str) -> None:
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=text, is_final=True),
    )


async def _first_turn_during_the_handoff(
    make_session: MakeSession, journal: Journal, *, item_added: bool
) -> tuple[AgentSession[Any], JournalingAgent, ScriptedRealtimeSession, str]:
    model = _model(journal)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(TO_BILLING)
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        item_id = _reply_first(rt, FIRST, item_added=item_added)
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    billing = journal.billing
    assert isinstance(billing, JournalingAgent)
    await settled_on(session, billing)
    assert model.live_sessions == [rt]
    return session, billing, rt, item_id


def _first_superseded(session: AgentSession[Any], journal: Journal) -> None:
    assert user_messages(session, FIRST) == 1, spoken(session)
    assert user_messages(session, SECOND) == 1, spoken(session)
    assert [users[-2:] for users in journal.context_of_answers_to(SECOND)] == [[FIRST, SECOND]], (
        journal.answers
    )
    assert not journal.context_of_answers_to(FIRST), journal.answers
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SECOND}"]


@pytest.mark.parametrize("late", ["as the caller speaks", "after the answer"])
async def test_a_late_transcript_of_a_turn_the_model_did_not_hold_yet_is_superseded(
    make_session: MakeSession, late: str
) -> None:
    """The model holds no item for the first turn as it replies: the transcript comes once
    the caller speaks again (while the caller speaks, or after billing answered the next turn)."""
    journal = Journal()
    session, billing, rt, first_id = await _first_turn_during_the_handoff(
        make_session, journal, item_added=False
    )

    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    # the model adds the first turn's item late, but before the caller's next turn ends
    rt._chat_ctx.add_message(role="user", content=FIRST, id=first_id)
    if late == "as the caller speaks":
        _transcribed(rt, first_id, FIRST)
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    second_id = utils.shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=SECOND, id=second_id)
    _transcribed(rt, second_id, SECOND)
    second = rt.emit_generation()
    await bounded(second.done, what="the answer to the caller's next turn")
    await settled_on(session, billing)
    if late == "after the answer":
        _transcribed(rt, first_id, FIRST)
        await settled_on(session, billing)

    _first_superseded(session, journal)


async def test_a_late_transcript_after_the_next_turn_was_answered_is_not_answered(
    make_session: MakeSession,
) -> None:
    """The model holds the first turn's item as it replies: billing awaits that item's
    transcript, which comes only after billing answered the caller's next turn."""
    journal = Journal()
    session, billing, rt, first_id = await _first_turn_during_the_handoff(
        make_session, journal, item_added=True
    )

    second = rt.simulate_user_turn(SECOND)
    assert second is not None
    await bounded(second.done, what="the answer to the caller's next turn")
    await settled_on(session, billing)
    _transcribed(rt, first_id, FIRST)
    await settled_on(session, billing)

    assert user_messages(session, FIRST) == 1, spoken(session)
    assert user_messages(session, SECOND) == 1, spoken(session)
    # (the model answering the next turn lacks the first: the handoff synced its context to
    # billing's, which had no transcript of it yet; a stock behaviour this does not pin)
    assert [users[-1] for _, users in journal.answers] == [SECOND], journal.answers
    # the fork's bug: billing answered the first turn once its transcript came, after the
    # caller's next turn was answered: the caller hears a stale answer last
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SECOND}"]


async def test_a_later_turn_answered_before_the_turn_handed_over_is_asked_for_is_answered_once(
    make_session: MakeSession,
) -> None:
    """The first turn's transcript comes once the caller speaks again, and billing takes the
    turn; before billing asked the model for its answer (it pushes the transcript to the model
    first), the caller's next turn ends and the model replies to it."""
    journal = Journal()
    session, billing, rt, first_id = await _first_turn_during_the_handoff(
        make_session, journal, item_added=True
    )

    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    _transcribed(rt, first_id, FIRST)
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    second_id = utils.shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=SECOND, id=second_id)
    _transcribed(rt, second_id, SECOND)
    second = rt.emit_generation()
    await bounded(second.done, what="the answer to the caller's next turn")
    await settled_on(session, billing)

    assert user_messages(session, FIRST) == 1, spoken(session)
    assert user_messages(session, SECOND) == 1, spoken(session)
    # the fork's bug: billing asked the model for an answer to the first turn after the
    # model replied to the next one; the model, whose context ends with the next turn by
    # then, answers it a second time, after its first answer
    assert [users[-1] for _, users in journal.answers] == [SECOND], journal.answers
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SECOND}"]
