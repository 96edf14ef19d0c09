"""livekit/agents#3129: a realtime model's own reply to tool outputs and the caller's spoken turns.

A model with automatic tool replies answers the tool outputs it is given with a generation of
its own: one more ``generation_created`` nobody asked for, like the reply its server creates for
a turn of the caller's. The scripted model here reports the caller's speech start and end, as
OpenAI-style servers do.

* The caller starts a turn and tool outputs reach the model before it has the turn (no item,
  no transcript): the model answers the outputs without it. That reply answers no turn: the one
  the model creates once it has the turn does. It is a tool reply the caller talked over, and
  it is dropped as a tool reply asked for then is (not after a noise, see the guards): it
  answers the turn before, and played after the caller went on. Stock plays it; taken for the
  turn's answer, it left the turn's real answer passing for none, so a turn ending across a
  handoff was answered twice.
* A turn handed over to the arriving agent is in its model's context when tool outputs reach
  the model (the agent adds a lookup to its context as it enters): the model's own reply to
  them answers the turn, and the agent must not ask for another answer. Stock drops the turn.
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
    ScriptedRealtimeSession,
    bounded,
    spoken,
    tool_call,
    wait_for_event,
)
from tests.fakes.desks import BILLING, DESK, SPOKEN, TO_BILLING, Desk, desk_realtime_model
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_3129_realtime_spoken_turns import Journal

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

BALANCE = "What's my balance?"


def _own_tool_reply(model: ScriptedRealtimeModel, rt: ScriptedRealtimeSession) -> asyncio.Future[object]:
    """Resolves once ``rt`` creates its own reply to tool outputs."""
    return asyncio.ensure_future(
        wait_for_event(rt, "generation_created", lambda _: model.generations[-1].source == "auto_tool_reply")
    )


def _rest_of_the_turn(rt: ScriptedRealtimeSession, text: str, *, transcript_first: bool = True) -> None:
    """The caller stops speaking; the server adds the turn, transcribes it and replies to it."""
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    item_id = utils.shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=text, id=item_id)

    def transcribed() -> None:
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=text, is_final=True),
        )

    if transcript_first:
        transcribed()
    rt.emit_generation()
    if not transcript_first:
        transcribed()


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


@BUG
async def test_the_models_own_tool_reply_while_the_caller_speaks_is_superseded_by_their_turn(
    make_session: MakeSession,
) -> None:
    journal = LookupJournal()
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("look_up_balance")])],
        fallback=journal.answer,
        turn_detection=True,
        user_transcription=True,
        auto_tool_reply_generation=True,
    )
    desk = BalanceDesk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(BALANCE)
    await journal.lookup.reached()

    # the caller speaks again while the tool runs; its output reaches the model meanwhile,
    # which answers it on its own (the caller's turn is not in its context yet)
    rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
    tool_reply = _own_tool_reply(model, rt)
    journal.lookup.open()
    await bounded(tool_reply, what="the model's own reply to the lookup")
    _rest_of_the_turn(rt, SPOKEN)
    await bounded(model.generations[-1].done, what="the model's reply to the caller's turn")
    await settled_on(session, desk)

    assert user_messages(session, SPOKEN) == 1, spoken(session)
    # the bug: the tool reply, an answer to the turn before, plays after the caller went on
    assert spoken(session) == [f"{DESK} answers: {SPOKEN}"], journal.answers


@BUG
@pytest.mark.parametrize("transcript_first", [True, False], ids=["transcript-first", "reply-first"])
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_a_turn_begun_as_the_model_replies_to_a_handoff_output_ends_as_the_desk_leaves(
    make_session: MakeSession, reuse: bool, transcript_first: bool
) -> None:
    """The caller starts speaking as the desk's tool returns billing; the model answers the
    tool's output on its own before it has their turn, and the turn ends while the desk runs
    its on_exit: billing answers it, once."""
    journal = Journal()
    model = desk_realtime_model(journal.answer, reuse=reuse, auto_tool_reply_generation=True)
    session = await make_session(Desk(journal, message=None), llm=model)
    rt = model.sessions[-1]
    session.once(
        "function_tools_executed",
        lambda _: rt.emit("input_speech_started", llm.InputSpeechStartedEvent()),
    )
    tool_reply = _own_tool_reply(model, rt)
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    rt.simulate_user_turn(TO_BILLING)
    await bounded(tool_reply, what="the model's own reply to the handoff's output")
    async with gate.held():
        _rest_of_the_turn(rt, SPOKEN, transcript_first=transcript_first)
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1, spoken(session)
    # the bug: nobody answers it
    assert [t for t in spoken(session) if t.endswith(SPOKEN)] == [f"{BILLING} answers: {SPOKEN}"], (
        journal.answers
    )


class LookingUpBilling(JournalingAgent):
    """Billing adds what a CRM lookup found to its context as it enters."""

    async def on_enter(self) -> None:
        await super().on_enter()
        chat_ctx = self.chat_ctx.copy()
        chat_ctx.items.extend(
            [
                llm.FunctionCall(name="crm_lookup", call_id="crm_lookup_1", arguments="{}"),
                llm.FunctionCallOutput(
                    name="crm_lookup", call_id="crm_lookup_1", output="a premium customer", is_error=False
                ),
            ]
        )
        await self.update_chat_ctx(chat_ctx, exclude_invalid_function_calls=False)


@BUG
@pytest.mark.parametrize("transcript_first", [True, False], ids=["transcript-first", "reply-first"])
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_the_models_own_tool_reply_answers_the_turn_handed_over(
    make_session: MakeSession, reuse: bool, transcript_first: bool
) -> None:
    journal = Journal()
    journal.billing_cls = LookingUpBilling
    model = desk_realtime_model(journal.answer, reuse=reuse, auto_tool_reply_generation=True)
    session = await make_session(Desk(journal, message=None), llm=model)
    model.sessions[-1].simulate_user_turn(TO_BILLING)

    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    async with gate.held():
        # the turn ends while the desk leaves: billing answers it
        model.sessions[-1].simulate_user_turn(SPOKEN, transcript_first=transcript_first)
    billing = journal.billing
    assert billing is not None
    await settled_on(session, billing)

    assert user_messages(session, SPOKEN) == 1, spoken(session)
    # the bug: nobody answers it (and billing asked its model for an answer the model gave on
    # its own, with the lookup, so it answered twice)
    assert [t for t in spoken(session) if t.startswith(BILLING)] == [f"{BILLING} answers: {SPOKEN}"], (
        journal.answers
    )
