"""A spoken turn that ends while the session closes (its activity drains the reply in
progress) is recorded in the history, and nobody answers it: the session is going away.
Stock's behaviour, kept by 0016, which hands over only the turns a handoff has an agent
for; the caller's audio goes through the session's audio input, VAD and STT."""

from __future__ import annotations

import asyncio

from livekit.agents import Agent

from tests.fakes import Caller, Gate, LLMCall, Reply, ScriptedLLM, bounded, start_session
from tests.fakes.history import user_messages

AGENT = "You are the front desk."
QUESTION = "What are your opening hours?"
ANSWER = "We are open from nine to five."
SPOKEN = "And on Sundays?"


async def test_a_spoken_turn_ending_while_the_session_closes_is_recorded_not_answered() -> None:
    gate = Gate("answer")
    asked: list[str | None] = []

    def answer(call: LLMCall) -> Reply:
        asked.append(call.last_user_text)
        return Reply(ANSWER, first_token_delay=gate.wait)

    caller = Caller()
    session = await start_session(
        Agent(instructions=AGENT), llm=ScriptedLLM([], fallback=answer), **caller.session_kwargs()
    )
    caller.attach(session)
    closing: asyncio.Future[None] | None = None
    try:
        await caller.say(QUESTION)
        await gate.reached()
        closing = asyncio.ensure_future(session.aclose())
        await asyncio.sleep(0)  # one loop step: the close starts draining the activity
        assert session._closing
        await caller.say(SPOKEN)
    finally:
        gate.open()
        await bounded(closing if closing is not None else session.aclose(), what="AgentSession.aclose")

    assert user_messages(session, SPOKEN) == 1
    assert asked == [QUESTION]
