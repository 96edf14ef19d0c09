"""A caller who speaks over a realtime greeting that has not played yet loses the answer to what
they say.

The agent greets the caller in its ``on_enter`` (``generate_reply(instructions=...)``); the
realtime model's server detects the caller's turns. The caller speaks before a word of the
greeting played: the server's speech start interrupts the greeting, and the server answers the
turn as soon as it ends. The greeting's speech task only then gets to run and, seeing its
response still generating, calls ``RealtimeSession.interrupt()``, which cancels whatever response
is active: the answer to the caller's turn. The turn is in the history and never answered (the
same defect as a barge-in on the server's own reply, for a reply ``generate_reply()`` asked for).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import llm, utils

from tests.fakes import (
    Gate,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    bounded,
    spoken,
)
from tests.fakes.agents import Journal, JournalingAgent

GREET = "Greet the caller."
TURN = "Hi, it's about my refund."


class Greeter(JournalingAgent):
    async def on_enter(self) -> None:
        await super().on_enter()
        self.session.generate_reply(instructions=GREET)


@pytest.mark.upstream_bug("not-yet: interrupting an unplayed realtime reply cancels the model's next one")
@pytest.mark.parametrize("transcript_first", [True, False], ids=["transcript-first", "reply-first"])
async def test_speaking_over_an_unplayed_greeting_keeps_the_answer_to_the_turn(
    make_session: MakeSession, transcript_first: bool
) -> None:
    streaming = Gate("the greeting's first words")

    def answer(gen: RTGeneration) -> Reply:
        if gen.extra_instructions == GREET:
            return Reply("hello there", hold=streaming)
        users = [m.text_content for m in gen.chat_ctx.messages() if m.role == "user"]
        return Reply(f"answering: {users[-1]}")

    model = ScriptedRealtimeModel(fallback=answer, turn_detection=True, user_transcription=True)
    session = await make_session(Greeter(Journal(), name="desk", instructions="desk"), llm=model)
    await streaming.reached()
    greeting = model.generations[-1]
    assert greeting.extra_instructions == GREET

    # not a word of the greeting played: the caller speaks, and the server answers at once
    rt = model.sessions[-1]
    reply = rt.simulate_user_turn(TURN, transcript_first=transcript_first)
    streaming.open()
    await bounded(session.wait_for_idle(), what="the session settling")
    await bounded(reply.done, what="the answer's streams")

    users = [m.text_content for m in session.history.messages() if m.role == "user"]
    assert users.count(TURN) == 1
    assert greeting.interrupt_requested, "the caller's speech interrupted the greeting"
    # the bug: the greeting's interruption cancels the answer to the turn on the server
    assert not reply.interrupt_requested, "the greeting's interruption cancelled the answer"
    assert spoken(session) == [f"answering: {TURN}"]


@pytest.mark.upstream_bug("not-yet: interrupting an unplayed realtime reply cancels the model's next one")
async def test_speaking_as_the_greeting_is_created_keeps_the_answer_to_the_turn(
    make_session: MakeSession,
) -> None:
    """The caller speaks, and the server answers, as the model creates the greeting: the greeting's
    speech task finds its speech interrupted once the reply landed, before reading any of it."""

    def answer(gen: RTGeneration) -> str:
        users = [m.text_content for m in gen.chat_ctx.messages() if m.role == "user"]
        return "hello there" if gen.extra_instructions == GREET else f"answering: {users[-1]}"

    model = ScriptedRealtimeModel(fallback=answer, turn_detection=True, user_transcription=True)
    created = asyncio.Event()
    replies: list[RTGeneration] = []
    original = ScriptedRealtimeSession.generate_reply

    def generate_reply(self: ScriptedRealtimeSession, **kwargs: Any) -> Any:
        fut = original(self, **kwargs)
        if kwargs.get("instructions") == GREET and not replies:
            # once the greeting landed, in one step: speech start (a barge-in), end, the
            # server's reply, the transcript
            asyncio.get_running_loop().call_soon(speak, self)
        return fut

    def speak(rt: ScriptedRealtimeSession) -> None:
        item_id = utils.shortuuid("fake_user_")
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        rt._chat_ctx.add_message(role="user", content=TURN, id=item_id)
        replies.append(rt.emit_generation())
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=TURN, is_final=True),
        )
        created.set()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ScriptedRealtimeSession, "generate_reply", generate_reply)
        session = await make_session(Greeter(Journal(), name="desk", instructions="desk"), llm=model)
        await bounded(created.wait(), what="the greeting's generation")
        await bounded(session.wait_for_idle(), what="the session settling")
        await bounded(replies[0].done, what="the answer's streams")

    greeting = next(g for g in model.generations if g.extra_instructions == GREET)
    assert greeting.interrupt_requested or greeting.outcome == "pending", "the greeting never played"
    users = [m.text_content for m in session.history.messages() if m.role == "user"]
    assert users.count(TURN) == 1
    # the bug: the greeting's interruption cancels the answer to the turn on the server
    assert not replies[0].interrupt_requested, "the greeting's interruption cancelled the answer"
    assert spoken(session) == [f"answering: {TURN}"]
