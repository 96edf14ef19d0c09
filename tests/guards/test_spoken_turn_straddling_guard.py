"""A spoken turn that straddles a handoff: the caller starts talking to one agent (the VAD's
start of speech, an interim transcript), the application hands over with ``update_agent()``,
and the turn ends on the arriving agent (the end of speech and the final transcript). The
session reuses the STT stream across the handoff, so the final transcript reaches the arriving
agent; the leaving agent's VAD stream closes with the caller speaking, which ends their speech
there ("listening"), and the arriving agent's VAD hears the rest as a new start of speech. The
turn is recorded once and answered once, by the arriving agent, with the VAD's end of speech or
the STT's ending the turn; on stock and on the fork alike."""

from __future__ import annotations

import asyncio

import pytest

from tests import fakes
from tests.fakes import Caller, JournalingAgent, LLMCall, MakeSession, Reply, ScriptedLLM, bounded, spoken
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

AGENT_A = "You are agent A."
AGENT_B = "You are agent B."
SPOKEN = "Actually, it's about a refund."
INTERIM = "Actually"


@pytest.mark.parametrize("turn_detection", ["vad", "stt"])
async def test_a_turn_straddling_update_agent_is_answered_once_by_the_arriving_agent(
    make_session: MakeSession, turn_detection: str
) -> None:
    journal = fakes.Journal()
    a = JournalingAgent(journal, name="a", instructions=AGENT_A)
    b = JournalingAgent(journal, name="b", instructions=AGENT_B)
    asked: list[tuple[str | None, str | None]] = []

    def answer(call: LLMCall) -> Reply:
        asked.append((call.instructions, call.last_user_text))
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    caller = Caller()
    session = await make_session(
        a,
        llm=ScriptedLLM([], fallback=answer),
        **caller.session_kwargs(turn_handling={"turn_detection": turn_detection}),
    )
    caller.attach(session)

    await caller.start_speaking()
    caller.stt.start_of_speech()
    await caller.interim(INTERIM)
    session.update_agent(b)
    await bounded(journal.entered["b"].wait(), what="b's on_enter")
    await settled_on(session, b)
    assert len(caller.stt.streams) == 1  # the STT stream is the one a ran
    assert user_messages(session, SPOKEN) == 0

    recorded = asyncio.ensure_future(
        fakes.wait_for_event(session, "conversation_item_added", lambda ev: ev.item.role == "user")
    )
    await caller.start_speaking()  # b's VAD hears the caller still talking
    await caller.stop_speaking()
    await caller.final(SPOKEN)
    caller.stt.end_of_speech()
    await caller.turn_ended()
    await bounded(recorded, what="the turn recorded")
    await settled_on(session, b)

    assert user_messages(session, SPOKEN) == 1
    assert asked == [(AGENT_B, SPOKEN)]
    assert spoken(session) == [f"{AGENT_B} answers: {SPOKEN}"]
    assert journal.events == ["enter a", "exit a", "enter b"]
