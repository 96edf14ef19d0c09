"""livekit/agents#3129: words the STT finalised before a handoff, in a turn that ends after it.

A streaming STT finalises a caller's words as they go (one final transcript per phrase); the
turn ends later, at the VAD's end of speech. The session reuses its STT stream across a
handoff: the leaving activity hands it on (``AgentActivity._detach_reusable_resources()``) and
closes its ``AudioRecognition``, which held the final transcripts of the turn in progress. On
stock they go with it: the arriving agent's turn starts empty, and when the caller stops, the
words said before the handoff are in no user message and nobody answers them.

The caller's audio goes through the session's own audio input, VAD and STT
(``tests.fakes.speech``); the handoff is ``update_agent()``, held in the leaving agent's
``on_exit`` while the caller talks.
"""

from __future__ import annotations

import pytest

from tests import fakes
from tests.fakes import (
    Caller,
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    spoken,
)
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug("livekit/agents#3129")

DESK = "You are the front desk."
BILLING = "You are the billing desk."
HELLO = "Hello."
ACCOUNT = "My account number is 1234."
MORE = "And it's about a refund."


def answer(call: LLMCall) -> Reply:
    return Reply(f"{call.instructions} answers: {call.last_user_text}")


async def _start(make_session: MakeSession) -> tuple[fakes.Journal, Caller, JournalingAgent, Gate]:
    journal = fakes.Journal()
    caller = Caller()
    desk = JournalingAgent(journal, name="desk", instructions=DESK)
    session = await make_session(
        desk,
        llm=ScriptedLLM([], fallback=answer),
        **caller.session_kwargs(),
    )
    caller.attach(session)
    await caller.say(HELLO)
    await settled_on(session, desk)
    billing = JournalingAgent(journal, name="billing", instructions=BILLING)
    journal.exit_gates["desk"] = gate = Gate("the desk's on_exit")
    session.update_agent(billing)
    await bounded(journal.exiting["desk"].wait(), what="the desk's on_exit")
    return journal, caller, billing, gate


@BUG
async def test_words_finalised_before_a_handoff_are_answered_after_it(make_session: MakeSession) -> None:
    journal, caller, billing, gate = await _start(make_session)
    session = caller._session()
    try:
        # the desk is being handed over; the caller talks, and the STT finalises their first
        # words while they go on
        await caller.start_speaking()
        await caller.final(ACCOUNT)
    finally:
        gate.open()
    await settled_on(session, billing)

    # the handoff is done: billing's VAD hears the caller go on, who stops; the turn ends there
    await caller.start_speaking()
    await caller.stop_speaking()
    await caller.turn_ended()
    await settled_on(session, billing)

    # the bug: the words transcribed before the handoff are lost with the desk's recognition
    assert user_messages(session, ACCOUNT) == 1, [
        (i.role, i.text_content) for i in session.history.items if i.type == "message"
    ]
    assert spoken(session) == [f"{DESK} answers: {HELLO}", f"{BILLING} answers: {ACCOUNT}"]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]


@BUG
async def test_words_finalised_before_a_handoff_open_the_turn_that_ends_after_it(
    make_session: MakeSession,
) -> None:
    journal, caller, billing, gate = await _start(make_session)
    session = caller._session()
    try:
        await caller.start_speaking()
        await caller.final(ACCOUNT)
    finally:
        gate.open()
    await settled_on(session, billing)

    # the caller's next phrase is finalised on billing's recognition before they stop: one
    # turn, both phrases
    await caller.start_speaking()
    await caller.final(MORE)
    await caller.stop_speaking()
    await caller.turn_ended()
    await settled_on(session, billing)

    both = f"{ACCOUNT} {MORE}"
    # the bug: the turn starts with the phrase said after the handoff
    assert user_messages(session, both) == 1, [
        (i.role, i.text_content) for i in session.history.items if i.type == "message"
    ]
    assert spoken(session) == [f"{DESK} answers: {HELLO}", f"{BILLING} answers: {both}"]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
