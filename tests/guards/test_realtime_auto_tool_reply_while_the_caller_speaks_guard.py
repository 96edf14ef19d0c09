"""Guards: the model's own reply to tool outputs, created while the caller speaks (pass on stock
1.8.9 and on the fork).

A model with automatic tool replies answers the tool outputs it is given on its own; its server
also reports the caller's speech start and end. The outputs reach it after the caller began to
speak, before it has their turn:

* the caller's turn then ends on the agent the tool handed over to, whose model answers it:
  stock answers the turn once. The fork took the model's reply to the tool output for the reply
  to the turn (the speech start was its to answer), handed the turn over to billing, which asked
  for an answer to it, and the model's own reply to the turn played too: answered twice;
* the speech start was a noise (its end came with no transcript and no reply): the model's
  reply to the outputs plays, on stock as on the fork, which drops it only for a turn.
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import function_tool, llm, utils

from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    ScriptedRealtimeModel,
    bounded,
    spoken,
    tool_call,
    wait_for_event,
)
from tests.fakes.desks import BILLING, DESK, SPOKEN, TO_BILLING, Desk
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_3129_realtime_spoken_turns import Journal

BALANCE = "What's my balance?"


def _model(journal: Journal, first: str) -> ScriptedRealtimeModel:
    return ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call(first)])],
        fallback=journal.answer,
        reuse=True,
        turn_detection=True,
        user_transcription=True,
        auto_tool_reply_generation=True,
    )


@pytest.mark.parametrize("transcript_first", [True, False], ids=["transcript-first", "reply-first"])
async def test_the_models_own_reply_to_a_handoff_output_is_no_answer_to_the_turn_being_spoken(
    make_session: MakeSession, transcript_first: bool
) -> None:
    journal = Journal()
    model = _model(journal, "to_billing")
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    # the caller starts speaking as the tool returns billing, before its output reaches the model
    session.once(
        "function_tools_executed",
        lambda _: rt.emit("input_speech_started", llm.InputSpeechStartedEvent()),
    )
    tool_reply = asyncio.ensure_future(
        wait_for_event(rt, "generation_created", lambda _: model.generations[-1].source == "auto_tool_reply")
    )
    rt.simulate_user_turn(TO_BILLING)
    await bounded(tool_reply, what="the model's own reply to the handoff's output")
    # the caller stops; the handoff goes on, and the rest of the turn comes to billing
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    billing = journal.billing
    assert billing is not None
    item_id = utils.shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=SPOKEN, id=item_id)

    def transcribed() -> None:
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=SPOKEN, is_final=True),
        )

    if transcript_first:
        transcribed()
    reply = rt.emit_generation()
    if not transcript_first:
        transcribed()
    await bounded(reply.done, what="the model's reply to the caller's turn")
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1, spoken(session)
    assert [t for t in spoken(session) if t.endswith(SPOKEN)] == [f"{BILLING} answers: {SPOKEN}"], (
        journal.answers
    )


class LookupJournal(Journal):
    def __init__(self) -> None:
        super().__init__()
        self.lookup = Gate("the balance lookup")


class BalanceDesk(JournalingAgent):
    journal: LookupJournal

    @function_tool
    async def look_up_balance(self) -> str:
        """Look the caller's balance up."""
        await self.journal.lookup.wait()
        return "42 EUR"


async def test_a_noise_while_the_tool_runs_does_not_drop_the_models_own_tool_reply(
    make_session: MakeSession,
) -> None:
    journal = LookupJournal()
    model = _model(journal, "look_up_balance")
    desk = BalanceDesk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(BALANCE)
    await journal.lookup.reached()

    # a noise starts while the tool runs; its output reaches the model meanwhile
    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    tool_reply = asyncio.ensure_future(
        wait_for_event(rt, "generation_created", lambda _: model.generations[-1].source == "auto_tool_reply")
    )
    journal.lookup.open()
    await bounded(tool_reply, what="the model's own reply to the lookup")
    generation = model.generations[-1]
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    await bounded(generation.done, what="the model's own reply to the lookup")
    await settled_on(session, desk)

    assert user_messages(session, BALANCE) == 1, spoken(session)
    assert spoken(session) == [f"{DESK} answers: {BALANCE}"], journal.answers
