"""A spoken turn with no handoff: the caller's audio goes through the session's audio input,
VAD and STT; the turn is recorded in the history once and answered once, on stock and on the
fork alike. The handoff cases build on this (tests/regression/test_3129_spoken_turns.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import Agent, AgentSession

from tests.fakes import (
    Caller,
    FakeAudioOutput,
    FakeTTS,
    MakeSession,
    ScriptedLLM,
    bounded,
    spoken,
    wait_for_event,
)

AGENT = "You are the front desk."
QUESTION = "What are your opening hours?"
ANSWER = "We are open from nine to five."


def user_messages(session: AgentSession[Any]) -> list[str]:
    return [i.text_content or "" for i in session.history.items if i.type == "message" and i.role == "user"]


async def test_a_spoken_turn_is_recorded_once_and_answered(make_session: MakeSession) -> None:
    caller = Caller()
    fake = ScriptedLLM([ANSWER])
    tts = FakeTTS()
    session = await make_session(
        Agent(instructions=AGENT),
        llm=fake,
        tts=tts,
        audio_output=FakeAudioOutput(),
        **caller.session_kwargs(),
    )
    caller.attach(session)

    answered = asyncio.ensure_future(
        wait_for_event(session, "conversation_item_added", lambda ev: ev.item.role == "assistant")
    )
    await caller.say(QUESTION, interim="What are")
    await bounded(answered, what="the answer to the spoken turn")

    assert user_messages(session) == [QUESTION]
    assert spoken(session) == [ANSWER]
    assert [c.last_user_text for c in fake.calls] == [QUESTION]
    assert tts.texts == [ANSWER]
    assert caller.stt.frames == caller.audio.frames_pushed > 0
