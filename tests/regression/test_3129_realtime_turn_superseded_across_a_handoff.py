"""livekit/agents#3129: the caller speaks again before the answer to a turn handed over exists.

The caller's turn ends while the desk is handed over to billing: billing answers it. But the
caller goes on talking, and the realtime model's server hears them start the next turn before
billing asked the model for that answer. Without a handoff, the model's reply to the first turn
exists as the turn ends, and the caller's speech start interrupts it before it plays
(``input_speech_started``): the caller went on, the first turn is superseded (CONTRIBUTING.md,
"Spoken turns"), and the model answers the next turn with the first in its context. Here the
reply only comes into being after that speech start, which interrupted nothing: it waits for the
caller's silence, then plays after the next turn ended, and that turn is answered too. The
caller hears a stale answer.

Where the caller speaks again: to billing's realtime session as billing comes in (the session
handed on or replaced), to the session still with the desk as it leaves (handed on), or to
billing's model after the pipeline desk's STT ended the turn. Stock drops the turn that ends
during the handoff: the desk's model reply to it is skipped and billing's context lacks it,
so the model answering the caller's next turn does not know it (the assertion on its context).
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool, llm, utils

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
from tests.fakes.desks import (
    BILLING,
    DESK,
    TO_BILLING,
    Desk,
    DeskJournal,
    desk_realtime_model,
    spoken_session,
)
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

FIRST = "I was charged twice."
SECOND = "Actually, it's about a refund."


class Journal(DeskJournal):
    def __init__(self) -> None:
        super().__init__()
        self.billing_cls = Billing
        # the caller starts SECOND as billing comes in (its on_enter)
        self.speaks_as_billing_enters = False
        self.answers: list[tuple[str | None, list[str]]] = []
        # the model works on its answer to FIRST until this opens
        self.first_answer: Gate | None = None

    def answer(self, gen: RTGeneration) -> Reply:
        """The model's fallback: answers the last user message of its context, and records
        who answered with which user messages in the context."""
        users = [i.text_content or "" for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
        self.answers.append((gen.instructions, users))
        text = f"{gen.instructions} answers: {users[-1] if users else None}"
        return Reply(text, hold=self.first_answer if users and users[-1] == FIRST else None)

    def context_of_answers_to(self, text: str) -> list[list[str]]:
        return [users for _, users in self.answers if users and users[-1] == text]


class Billing(JournalingAgent):
    journal: Journal

    async def on_enter(self) -> None:
        if self.journal.speaks_as_billing_enters:
            # billing's model hears the caller start speaking again, before billing took the
            # turn handed over (the turn is started once on_enter runs)
            assert self._activity is not None
            rt = self._activity.realtime_llm_session
            assert isinstance(rt, ScriptedRealtimeSession)
            rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        await super().on_enter()


def _model(journal: Journal, **kwargs: Any) -> ScriptedRealtimeModel:
    return desk_realtime_model(journal.answer, **kwargs)


async def _took_the_turn(session: AgentSession[Any], journal: Journal) -> Agent:
    """Bounded: billing's on_enter ran and its activity took the turn handed over to it (on
    stock there is none)."""
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    billing = journal.billing
    assert billing is not None
    activity = billing._activity
    assert activity is not None
    if (turn_task := activity._user_turn_completed_atask) is not None:
        await bounded(turn_task, what="billing taking the turn handed over")
    return billing


def _rest_of_the_turn(rt: ScriptedRealtimeSession, text: str) -> RTGeneration:
    """The caller, already speaking, finishes ``text``: the server's end of speech, the
    transcript, and the model's reply."""
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    item_id = utils.shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=text, id=item_id)
    rt.emit(
        "input_audio_transcription_completed",
        llm.InputTranscriptionCompleted(item_id=item_id, transcript=text, is_final=True),
    )
    return rt.emit_generation()


def _second_answered_not_first(session: AgentSession[Any], journal: Journal) -> None:
    assert user_messages(session, FIRST) == 1, spoken(session)
    assert user_messages(session, SECOND) == 1, spoken(session)
    # the model answering the caller's next turn knows the turn handed over (stock drops it),
    # and is asked once: the bug, a second reply asked for the first turn after the caller's
    # next turn ended (which the model, whose context holds both turns by then, answers again)
    assert [users[-2:] for users in journal.context_of_answers_to(SECOND)] == [[FIRST, SECOND]], (
        journal.answers
    )
    assert not journal.context_of_answers_to(FIRST), journal.answers
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SECOND}"]


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_the_caller_speaking_again_as_the_arriving_agent_comes_in_supersedes_the_turn(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    journal.speaks_as_billing_enters = True
    model = _model(journal, reuse=reuse)
    session = await make_session(Desk(journal, message=None), llm=model)
    model.sessions[-1].simulate_user_turn(TO_BILLING)

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        # the turn ends while the desk leaves: its model's reply is skipped, billing answers it
        model.sessions[-1].simulate_user_turn(FIRST)
    billing = await _took_the_turn(session, journal)
    rt = model.live_sessions[-1]
    assert (rt is model.sessions[0]) is reuse

    second = _rest_of_the_turn(rt, SECOND)
    await settled_on(session, billing)
    await bounded(second.done, what="the answer to the caller's next turn")

    _second_answered_not_first(session, journal)
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


@BUG
async def test_the_caller_speaking_again_as_the_leaving_agent_exits_supersedes_the_turn(
    make_session: MakeSession,
) -> None:
    """The realtime session is handed on: the caller starts the next turn while it is still
    the desk's, which leaves."""
    journal = Journal()
    model = _model(journal, reuse=True)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(TO_BILLING)

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        rt.simulate_user_turn(FIRST)
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    billing = await _took_the_turn(session, journal)
    assert model.live_sessions == [rt]

    second = _rest_of_the_turn(rt, SECOND)
    await settled_on(session, billing)
    await bounded(second.done, what="the answer to the caller's next turn")

    _second_answered_not_first(session, journal)


@BUG
async def test_a_later_turn_handed_over_supersedes_the_reply_to_an_earlier_one(
    make_session: MakeSession,
) -> None:
    """The realtime session is handed on. While the desk leaves, the caller's first turn ends,
    then the next: the model creates its reply to it before the transcript comes in (which it
    does once billing runs). Billing asked the model for its answer to the first turn in the
    meantime: the caller went on before any of it played."""
    journal = Journal()
    journal.first_answer = Gate("the model's answer to the first turn")
    model = _model(journal, reuse=True)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(TO_BILLING)
    # the speeches created from here on: billing's (the desk's model replies during the handoff
    # are skipped)
    replies: list[Any] = []
    session.on("speech_created", lambda ev: replies.append(ev.speech_handle))

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    item_id = utils.shortuuid("fake_user_")
    async with gate.held():
        rt.simulate_user_turn(FIRST)
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        rt._chat_ctx.add_message(role="user", content=SECOND, id=item_id)
        rt.emit_generation()
    billing = await _took_the_turn(session, journal)
    try:
        if replies:
            # the model works on billing's answer to the first turn (stock asks for none)
            await journal.first_answer.reached()
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=SECOND, is_final=True),
        )
        await _took_the_turn(session, journal)
    finally:
        journal.first_answer.open()
    await settled_on(session, billing)

    assert user_messages(session, FIRST) == 1, spoken(session)
    assert user_messages(session, SECOND) == 1, spoken(session)
    assert [users[-2:] for users in journal.context_of_answers_to(SECOND)] == [[FIRST, SECOND]], (
        journal.answers
    )
    # the bug: billing's answer to the first turn plays after the caller's next turn ended
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SECOND}"]


# -- the pipeline desk's STT ends the turn; billing runs on a realtime model --


class ToRealtimeDesk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal, model: ScriptedRealtimeModel, **kwargs: Any) -> None:
        super().__init__(journal, name="desk", instructions=DESK, **kwargs)
        self.model = model

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        billing = self.journal.billing = Billing(
            self.journal, name="billing", instructions=BILLING, llm=self.model
        )
        return billing


@BUG
async def test_the_caller_speaking_again_to_the_arriving_realtime_agent_supersedes_the_turn(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    journal.speaks_as_billing_enters = True
    model = ScriptedRealtimeModel(
        [],
        fallback=journal.answer,
        turn_detection=True,
        can_disable_turn_detection=False,
        user_transcription=True,
    )
    session, caller, _ = await spoken_session(make_session, ToRealtimeDesk(journal, model), journal)
    await caller.say(TO_BILLING)

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        # the pipeline desk's STT ends the caller's turn while it leaves
        await caller.say(FIRST)
    billing = await _took_the_turn(session, journal)
    rt = model.live_sessions[-1]

    second = _rest_of_the_turn(rt, SECOND)
    await settled_on(session, billing)
    await bounded(second.done, what="the answer to the caller's next turn")

    _second_answered_not_first(session, journal)
