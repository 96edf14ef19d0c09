"""A turn the session closes on is recorded, and the closing agent does not answer it.

``AgentSession.aclose()`` runs the agent's ``on_exit()`` inside ``AgentActivity.drain()``,
which pauses the speech scheduling only once ``on_exit()`` returned. On stock, a user turn
that ends in that window (or that ended just before, its ``on_user_turn_completed`` still
running) gets a reply: ``_user_turn_completed_task()`` calls ``_generate_reply()``,
``_schedule_speech()`` accepts it, and ``drain()`` plays it out. The closing agent asks its
LLM and speaks after its ``on_exit()`` began, on a close that was to cut its speech. The
same for typed input (``generate_reply(user_input=...)``) and for a turn a realtime model's
server detects.

The rule (CONTRIBUTING, "Speech around a handoff" and "Spoken turns"): once ``on_exit()``
started, the agent starts nothing new; a turn the session closes on needs no answer, and is
in the history once. What ``on_exit()`` itself asks for (a goodbye) still plays: see
``tests/guards/test_close_on_a_turn_guard.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession, llm

from tests.fakes import (
    Caller,
    Gate,
    JournalingAgent,
    LLMCall,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    late_calls,
    spoken,
    start_session,
)
from tests.fakes.agents import Journal
from tests.fakes.history import user_messages

BUG = pytest.mark.upstream_bug("not-yet: a turn ending as the session closes is answered after on_exit began")

DESK = "You are the front desk."
QUESTION = "What are your opening hours?"
ANSWER = "We are open from nine to five."


class Asked:
    """The LLM's fallback: records what each call answered, and answers it."""

    def __init__(self) -> None:
        self.texts: list[str | None] = []

    def __call__(self, call: LLMCall) -> Reply:
        self.texts.append(call.last_user_text)
        return Reply(ANSWER)

    def realtime(self, gen: RTGeneration) -> str:
        users = [i for i in gen.chat_ctx.items if i.type == "message" and i.role == "user"]
        self.texts.append(users[-1].text_content if users else None)
        return ANSWER


async def _close_held_in_on_exit(
    session: AgentSession[Any], journal: Journal
) -> tuple[asyncio.Future[None], Gate]:
    """Start ``aclose()`` and return once the agent's ``on_exit()`` runs, held on a gate."""
    gate = journal.exit_gates["desk"] = Gate("desk on_exit")
    closing = asyncio.ensure_future(session.aclose())
    await gate.reached()
    return closing, gate


@BUG
async def test_a_spoken_turn_ending_during_the_close_s_on_exit_is_recorded_not_answered() -> None:
    journal = Journal()
    asked = Asked()
    caller = Caller()
    session = await start_session(
        JournalingAgent(journal, name="desk", instructions=DESK),
        llm=ScriptedLLM([], fallback=asked),
        **caller.session_kwargs(),
    )
    caller.attach(session)
    closing, gate = await _close_held_in_on_exit(session, journal)
    try:
        await caller.say(QUESTION)
    finally:
        gate.open()
        await bounded(closing, what="AgentSession.aclose")

    # the bug: the closing agent asks its LLM and answers, after its on_exit began
    assert asked.texts == []
    assert spoken(session) == []
    assert user_messages(session, QUESTION) == 1
    assert journal.events == ["enter desk", "exit desk"]


class HeldDesk(JournalingAgent):
    """Its ``on_user_turn_completed`` waits on a gate: the turn's task is still running when
    the session starts closing."""

    def __init__(self, journal: Journal, hook: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.hook = hook

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        await self.hook.wait()


@BUG
async def test_a_turn_that_ended_just_before_aclose_is_recorded_not_answered() -> None:
    journal = Journal()
    asked = Asked()
    hook = Gate("on_user_turn_completed")
    caller = Caller()
    desk = HeldDesk(journal, hook)
    session = await start_session(desk, llm=ScriptedLLM([], fallback=asked), **caller.session_kwargs())
    caller.attach(session)
    activity = session._activity
    assert activity is not None
    closing: asyncio.Future[None] | None = None
    gate: Gate | None = None
    try:
        await caller.say(QUESTION)
        await hook.reached()
        turn_task = activity._user_turn_completed_atask
        assert turn_task is not None
        closing, gate = await _close_held_in_on_exit(session, journal)
        hook.open()
        # the turn's task goes on to where it answers (stock) or records it, while on_exit runs
        await bounded(asyncio.wait({turn_task}), what="the user turn's task")
    finally:
        hook.open()
        if gate is not None:
            gate.open()
        await bounded(closing if closing is not None else session.aclose(), what="AgentSession.aclose")

    assert asked.texts == []
    assert spoken(session) == []
    assert user_messages(session, QUESTION) == 1
    assert journal.events == ["enter desk", "exit desk"]


@BUG
async def test_typed_input_during_the_close_s_on_exit_is_recorded_not_answered() -> None:
    journal = Journal()
    asked = Asked()
    session = await start_session(
        JournalingAgent(journal, name="desk", instructions=DESK), llm=ScriptedLLM([], fallback=asked)
    )
    closing, gate = await _close_held_in_on_exit(session, journal)
    try:
        handle = session.generate_reply(user_input=QUESTION)
    finally:
        gate.open()
        await bounded(closing, what="AgentSession.aclose")
    await bounded(handle.wait_for_playout(), what="the handle of the input the session closed on")

    assert asked.texts == []
    assert spoken(session) == []
    assert user_messages(session, QUESTION) == 1
    assert handle.interrupted


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_a_server_detected_turn_during_the_close_s_on_exit_is_not_answered(reuse: bool) -> None:
    journal = Journal()
    asked = Asked()
    model = ScriptedRealtimeModel(
        [], fallback=asked.realtime, reuse=reuse, turn_detection=True, user_transcription=True
    )
    session = await start_session(JournalingAgent(journal, name="desk", instructions=DESK), llm=model)
    closing, gate = await _close_held_in_on_exit(session, journal)
    try:
        model.sessions[-1].simulate_user_turn(QUESTION)
    finally:
        gate.open()
        await bounded(closing, what="AgentSession.aclose")

    # the bug: the server's reply to it plays, after the agent's on_exit began
    assert ANSWER not in spoken(session)
    assert user_messages(session, QUESTION) == 1
    assert journal.events == ["enter desk", "exit desk"]
    assert not late_calls(model)
