"""Spoken turns with no handoff in sight: what the hand-over of turns (0016, 0017, 0018) must
leave as stock 1.8.9 has it. The caller's turn is answered once by the current agent; a turn
that ends before any audio of the answer to the previous one played supersedes it (the earlier
turn stays in the history, the later one is answered with it in context)."""

from __future__ import annotations

from typing import Any

from livekit.agents import AgentSession

from tests import fakes
from tests.fakes import Caller, Gate, JournalingAgent, LLMCall, MakeSession, Reply, ScriptedLLM, spoken
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

DESK = "You are the front desk."
FIRST = "What are your opening hours?"
SECOND = "And on Sundays?"


async def test_a_turn_before_the_answer_plays_supersedes_the_previous_one(make_session: MakeSession) -> None:
    journal = fakes.Journal()
    held = Gate("the answer to the first turn")
    asked: list[str | None] = []

    def answer(call: LLMCall) -> Reply:
        asked.append(call.last_user_text)
        if call.last_user_text == FIRST:
            return Reply(f"answers: {FIRST}", first_token_delay=held.wait)
        return Reply(f"answers: {call.last_user_text}")

    caller = Caller()
    desk = JournalingAgent(journal, name="desk", instructions=DESK)
    session: AgentSession[Any] = await make_session(
        desk, llm=ScriptedLLM([], fallback=answer), **caller.session_kwargs()
    )
    caller.attach(session)

    await caller.say(FIRST)
    await held.reached()
    try:
        await caller.say(SECOND)
    finally:
        held.open()
    await settled_on(session, desk)

    assert user_messages(session, FIRST) == 1
    assert user_messages(session, SECOND) == 1
    assert spoken(session) == [f"answers: {SECOND}"]
    assert asked == [FIRST, SECOND]
    assert journal.events == ["enter desk"]
