"""Self-tests of the speech fakes (tests/fakes/speech.py): a caller's turn goes through the
session's real audio input, VAD and STT streams, and is answered."""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import Agent, AgentSession

from tests.fakes import Caller, MakeSession, ScriptedLLM, bounded, spoken, wait_for_event

AGENT = "You are the front desk."


def user_messages(session: AgentSession[Any]) -> list[str]:
    return [i.text_content or "" for i in session.history.items if i.type == "message" and i.role == "user"]


async def answered(session: AgentSession[Any], text: str) -> Any:
    return await wait_for_event(
        session,
        "conversation_item_added",
        lambda ev: ev.item.role == "assistant" and ev.item.text_content == text,
    )


async def test_a_spoken_turn_goes_through_the_audio_path_and_is_answered(make_session: MakeSession) -> None:
    caller = Caller()
    fake = ScriptedLLM(["Hello, how can I help?"])
    session = await make_session(Agent(instructions=AGENT), llm=fake, **caller.session_kwargs())
    caller.attach(session)

    reply = asyncio.ensure_future(answered(session, "Hello, how can I help?"))
    await caller.say("Hi there, I need help.", interim="Hi there")
    await bounded(reply, what="the answer to the spoken turn")

    assert user_messages(session) == ["Hi there, I need help."]
    assert spoken(session) == ["Hello, how can I help?"]
    assert fake.calls[0].last_user_text == "Hi there, I need help."
    # the frames went through the session's audio input into both streams
    assert caller.audio.frames_pushed == 5
    assert caller.vad.frames == 5 and caller.stt.frames == 5


async def test_each_step_is_taken_in_before_the_next(make_session: MakeSession) -> None:
    caller = Caller()
    fake = ScriptedLLM(["Sure."])
    session = await make_session(Agent(instructions=AGENT), llm=fake, **caller.session_kwargs())
    caller.attach(session)

    transcripts: list[tuple[str, bool]] = []
    session.on("user_input_transcribed", lambda ev: transcripts.append((ev.transcript, ev.is_final)))

    await caller.start_speaking()
    assert session.user_state == "speaking"
    await caller.interim("Book")
    await caller.interim("Book a table")
    await caller.stop_speaking()
    assert session.user_state == "listening"
    # no final transcript yet: no turn, nothing asked of the model
    assert fake.calls == [] and user_messages(session) == []

    reply = asyncio.ensure_future(answered(session, "Sure."))
    await caller.final("Book a table for two.")
    await bounded(reply, what="the answer")
    assert transcripts == [("Book", False), ("Book a table", False), ("Book a table for two.", True)]
    assert user_messages(session) == ["Book a table for two."]


async def test_stt_turn_detection(make_session: MakeSession) -> None:
    caller = Caller()
    fake = ScriptedLLM(["Done."])
    session = await make_session(
        Agent(instructions=AGENT), llm=fake, **caller.session_kwargs(turn_handling={"turn_detection": "stt"})
    )
    caller.attach(session)

    reply = asyncio.ensure_future(answered(session, "Done."))
    caller.audio.push(3)
    caller.stt.start_of_speech()
    caller.stt.final("Cancel my order.")
    caller.stt.end_of_speech()
    await bounded(reply, what="the answer")
    assert user_messages(session) == ["Cancel my order."]


async def test_two_turns_in_a_row_are_each_answered_once(make_session: MakeSession) -> None:
    caller = Caller()
    fake = ScriptedLLM(["First answer.", "Second answer."])
    session = await make_session(Agent(instructions=AGENT), llm=fake, **caller.session_kwargs())
    caller.attach(session)

    first = asyncio.ensure_future(answered(session, "First answer."))
    await caller.say("First question.")
    await bounded(first, what="the first answer")
    second = asyncio.ensure_future(answered(session, "Second answer."))
    await caller.say("Second question.")
    await bounded(second, what="the second answer")

    assert user_messages(session) == ["First question.", "Second question."]
    assert spoken(session) == ["First answer.", "Second answer."]
    assert [c.last_user_text for c in fake.calls] == ["First question.", "Second question."]
