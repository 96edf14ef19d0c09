"""A caller who barges in on the arriving agent's greeting (the reply its ``on_enter()`` asks
for) after a handoff: the turn is recorded once and answered once, by the arriving agent,
whose greeting the turn interrupts. On stock and on the fork alike; the caller's audio goes
through the session's audio input, VAD and STT (``tests.fakes.speech``)."""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import AgentSession
from livekit.agents.voice.agent_activity import ActivityClosedError

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
    tool_call,
)
from tests.fakes.desks import BILLING, DESK, TO_BILLING, Desk, DeskJournal
from tests.fakes.history import user_messages

GREET = "Greet the caller."
GREETING = "Hello, this is billing, how can I help?"
SPOKEN = "It's about my last invoice."


class Billing(JournalingAgent):
    async def on_enter(self) -> None:
        await super().on_enter()
        self.session.generate_reply(instructions=GREET)


async def idle_on(session: AgentSession[Any], instructions: str) -> None:
    async def _settle() -> None:
        while True:
            try:
                activity = await session.wait_for_idle()
            except ActivityClosedError:
                activity = None
            if activity is not None and activity.agent.instructions == instructions:
                return
            await asyncio.sleep(0)  # one loop step for the handoff to go on; no timer

    await bounded(_settle(), what="the arriving agent idle")


async def test_a_barge_in_on_the_arriving_agents_greeting_is_answered_by_it(
    make_session: MakeSession,
) -> None:
    journal = DeskJournal()
    journal.billing_cls = Billing
    gate = Gate("greeting")
    answered: list[tuple[str | None, str | None]] = []

    def answer(call: LLMCall) -> Reply:
        if call.system_texts[-1:] == [GREET]:
            return Reply(GREETING, first_token_delay=gate.wait)
        if call.instructions == DESK and call.last_user_text == TO_BILLING and call.tool_choice != "none":
            return Reply(tool_calls=[tool_call("to_billing")])
        answered.append((call.instructions, call.last_user_text))
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    caller = Caller()
    fake = ScriptedLLM([], fallback=answer)
    session = await make_session(Desk(journal, message=None), llm=fake, **caller.session_kwargs())
    caller.attach(session)

    await caller.say(TO_BILLING)
    async with gate.held():
        await caller.say(SPOKEN)
    await idle_on(session, BILLING)

    assert user_messages(session, SPOKEN) == 1
    assert (BILLING, SPOKEN) in answered
    assert [a for a in answered if a[1] == SPOKEN] == [(BILLING, SPOKEN)]
    assert spoken(session).count(f"{BILLING} answers: {SPOKEN}") == 1
    assert GREETING not in spoken(session)  # the caller cut it short before it said anything
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
