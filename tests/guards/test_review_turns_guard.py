"""Review of the spoken-turn patches (0016, 0017, 0021, 0022): what stock gets right and must stay
right with them. Each test passes on stock and on the fork.

* **A backchannel over the handoff message.** ``interruption["min_words"]`` keeps a turn shorter
  than that from interrupting what the agent says. The caller's "Okay." ends while the leaving
  agent voices its handoff message: the message plays whole (on stock the turn is dropped; with
  the turn handed over to the arriving agent, it must still not cut the message short).
"""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import Agent, AgentSession, function_tool

from tests import fakes
from tests.fakes import (
    Caller,
    FakeAudioOutput,
    FakeTTS,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    tool_call,
    wait_for_event,
)
from tests.fakes.session import settled_on

DESK = "You are the front desk."
BILLING = "You are the billing desk."
TRANSFERRING = "Transferring you"
TO_BILLING = "Put me through to billing."
OKAY = "Okay."
# 20 s at 2 ms a character, played ten times as fast: still playing when the caller's turn ends
VOICED = "One moment, I'm transferring you to billing. " + "Please hold. " * 770
SECONDS_PER_CHAR = 0.002
PLAYOUT_SPEED = 10.0


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.billing: Agent | None = None


class Desk(JournalingAgent):
    journal: Journal

    @function_tool
    async def to_billing(self) -> tuple[Agent, str]:
        """Put the caller through to the billing desk."""
        self.journal.billing = JournalingAgent(self.journal, name="billing", instructions=BILLING)
        return self.journal.billing, TRANSFERRING


def answer(call: LLMCall) -> Reply:
    if call.instructions == DESK and call.tool_choice == "none":
        return Reply(VOICED)
    if call.instructions == DESK and call.last_user_text == TO_BILLING:
        return Reply(tool_calls=[tool_call("to_billing")])
    return Reply(f"{call.instructions} answers: {call.last_user_text}")


async def speaking(session: AgentSession[Any]) -> None:
    if session.agent_state != "speaking":
        await wait_for_event(session, "agent_state_changed", lambda ev: ev.new_state == "speaking")


async def test_a_backchannel_over_the_handoff_message_does_not_interrupt_it(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    caller = Caller()
    audio_out = FakeAudioOutput(mode="realtime", speed=PLAYOUT_SPEED)
    session = await make_session(
        Desk(journal, name="desk", instructions=DESK),
        llm=ScriptedLLM([], fallback=answer),
        tts=FakeTTS(seconds_per_char=SECONDS_PER_CHAR),
        audio_output=audio_out,
        **caller.session_kwargs(turn_handling={"interruption": {"min_words": 3}}),
    )
    caller.attach(session)

    voicing = asyncio.ensure_future(speaking(session))
    await caller.say(TO_BILLING)
    await bounded(voicing, what="the desk voicing its handoff message")
    assert journal.billing is not None

    # a one-word turn over the message, which min_words keeps from interrupting the agent
    await caller.start_speaking()
    await caller.interim(OKAY)
    await caller.stop_speaking()
    assert audio_out.segments == [], "the handoff message ended before the caller's turn"
    await caller.final(OKAY)
    await caller.turn_ended()
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    await settled_on(session, journal.billing)

    assert [s.interrupted for s in audio_out.segments][:1] == [False]
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
