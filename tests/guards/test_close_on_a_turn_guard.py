"""What a session close keeps doing, next to the turns it now records without an answer
(tests/regression/test_turn_the_session_closes_on.py): stock's behaviour, pinned.

* A goodbye the agent asks for inside its ``on_exit()`` (``generate_reply()`` or ``say()``)
  still plays on ``aclose()``: it is the agent finishing what it says, not a new turn.
* A reply already playing when the close starts is cut by ``aclose()`` and played out by
  ``shutdown(drain=True)``.
* ``aclose()`` while a handoff runs the leaving agent's ``on_exit()``: that ``on_exit()``
  runs once, the arriving agent never starts, ``aclose()`` returns.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import (
    FakeAudioOutput,
    FakeTTS,
    Gate,
    JournalingAgent,
    LLMCall,
    Reply,
    ScriptedLLM,
    bounded,
    spoken,
    start_session,
    tool_call,
    wait_for_event,
)
from tests.fakes.agents import Journal
from tests.fakes.history import user_messages

DESK = "You are the front desk."
BILLING = "You are the billing desk."
QUESTION = "What are your opening hours?"
ANSWER = "We are open from nine to five, every day of the week except on public holidays."
GOODBYE_INSTRUCTIONS = "Say goodbye."
GOODBYE = "Goodbye, and thank you for calling."
TO_BILLING = "Put me through to billing."


def _answer(call: LLMCall) -> Reply:
    return Reply(GOODBYE if GOODBYE_INSTRUCTIONS in call.system_texts else ANSWER)


class GoodbyeDesk(JournalingAgent):
    def __init__(self, journal: Journal, how: str) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.how = how

    async def on_exit(self) -> None:
        await super().on_exit()
        if self.how == "generate_reply":
            await self.session.generate_reply(instructions=GOODBYE_INSTRUCTIONS)
        else:
            await self.session.say(GOODBYE)


@pytest.mark.parametrize("how", ["generate_reply", "say"])
async def test_a_goodbye_asked_for_in_on_exit_plays_on_close(how: str) -> None:
    journal = Journal()
    session = await start_session(GoodbyeDesk(journal, how), llm=ScriptedLLM([], fallback=_answer))
    await bounded(session.aclose(), what="AgentSession.aclose")

    assert spoken(session) == [GOODBYE]
    assert journal.events == ["enter desk", "exit desk"]


async def _speaking(session: AgentSession[Any]) -> Any:
    audio = FakeAudioOutput(mode="realtime", speed=4.0)
    session.output.audio = audio
    speaking = asyncio.ensure_future(
        wait_for_event(session, "agent_state_changed", lambda ev: ev.new_state == "speaking")
    )
    handle = session.generate_reply(user_input=QUESTION)
    await speaking
    return handle, audio


async def test_a_reply_playing_when_aclose_starts_is_interrupted() -> None:
    session = await start_session(
        Agent(instructions=DESK), llm=ScriptedLLM([], fallback=_answer), tts=FakeTTS()
    )
    handle, audio = await _speaking(session)
    await bounded(session.aclose(), what="AgentSession.aclose")

    assert handle.done() and handle.interrupted
    assert [s.interrupted for s in audio.segments] == [True]
    assert user_messages(session, QUESTION) == 1


async def test_a_reply_playing_when_shutdown_drains_plays_out() -> None:
    session = await start_session(
        Agent(instructions=DESK), llm=ScriptedLLM([], fallback=_answer), tts=FakeTTS()
    )
    handle, audio = await _speaking(session)
    closed = asyncio.ensure_future(wait_for_event(session, "close", lambda ev: True))
    session.shutdown(drain=True)
    await bounded(closed, what="the session's close event")

    assert handle.done() and not handle.interrupted
    assert [s.interrupted for s in audio.segments] == [False]
    assert spoken(session) == [ANSWER]
    assert user_messages(session, QUESTION) == 1


class Desk(JournalingAgent):
    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        return JournalingAgent(self.journal, name="billing", instructions=BILLING)


async def test_aclose_while_a_handoff_runs_the_leaving_agent_s_on_exit() -> None:
    journal = Journal()
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    model = ScriptedLLM([Reply(tool_calls=[tool_call("to_billing")])], fallback=_answer)
    session = await start_session(Desk(journal, name="desk", instructions=DESK), llm=model)
    session.generate_reply(user_input=TO_BILLING)
    await gate.reached()
    closing = asyncio.ensure_future(session.aclose())
    await asyncio.sleep(0)  # one loop step: the close starts, and waits for the handoff's drain
    gate.open()
    await bounded(closing, what="AgentSession.aclose")

    assert journal.events == ["enter desk", "exit desk"]
    assert user_messages(session, TO_BILLING) == 1
    assert len(model.calls) == 1
