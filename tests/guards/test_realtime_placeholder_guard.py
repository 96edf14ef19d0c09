"""Guards: a realtime user turn whose transcript arrives after the reply replaces its placeholder.

A realtime server announces the items it adds to the conversation (``remote_item_added``):
the committed user audio, before its transcript is ready, then the assistant's reply. The
agent's context appends them as placeholders (empty messages). The user's transcript comes
later, with client-side turn detection without the time the turn started
(``turn_started_at=None``), so it is stamped after the assistant's reply, and it must replace
the user's placeholder by id, where it is: one user message with the transcript, before the
reply, and no empty message left (an empty placeholder and a second copy of the transcript
after the reply is what a lookup stopping at the first older item produces).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, llm

from tests.fakes import (
    Gate,
    MakeSession,
    Reply,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    bounded,
    wait_for_event,
)

QUESTION = "What's the weather in Paris?"
ANSWER = "It is sunny in Paris."


def conversation(agent: Agent) -> list[tuple[str, str, str]]:
    """(id, role, text) of the user and assistant messages in the agent's context, in order."""
    return [
        (i.id, i.role, i.text_content or "")
        for i in agent.chat_ctx.items
        if i.type == "message" and i.role in ("user", "assistant")
    ]


def announce(rt: ScriptedRealtimeSession, agent: Agent, item: llm.ChatItem) -> None:
    """The server added ``item`` at the end of the conversation."""
    items = agent.chat_ctx.items
    rt.emit(
        "remote_item_added",
        llm.RemoteItemAddedEvent(previous_item_id=items[-1].id if items else None, item=item),
    )


async def voice_turn(
    session: AgentSession[Any],
    agent: Agent,
    rt: ScriptedRealtimeSession,
    *,
    user_id: str,
    question: str,
    transcript_when: str,
) -> None:
    """A user turn as the server reports it: placeholder, reply (held on a gate), the reply's
    placeholder, then the transcript, while the reply is generating or once it was added."""
    gate = Gate(f"reply to {user_id}")
    announce(rt, agent, llm.ChatMessage(role="user", content=[], id=user_id))
    gen = rt.emit_generation(Reply(ANSWER, hold=gate))
    assert gen.message_id is not None
    announce(rt, agent, llm.ChatMessage(role="assistant", content=[], id=gen.message_id))

    def transcribed() -> None:
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=user_id, transcript=question, is_final=True),
        )

    answered = asyncio.ensure_future(
        wait_for_event(
            session,
            "conversation_item_added",
            lambda ev: ev.item.role == "assistant" and ev.item.id == gen.message_id,
        )
    )
    try:
        if transcript_when == "while-replying":
            await gate.reached()
            transcribed()
            gate.open()
            await answered
        else:
            gate.open()
            await answered
            transcribed()
    finally:
        gate.open()
        if not answered.done():
            answered.cancel()
    await bounded(gen.done, what="the reply's generation")


@pytest.mark.parametrize("transcript_when", ["after-reply", "while-replying"])
@pytest.mark.parametrize("turns", [1, 3])
async def test_late_transcript_replaces_the_user_placeholder(
    make_session: MakeSession, transcript_when: str, turns: int
) -> None:
    model = ScriptedRealtimeModel(user_transcription=True)
    agent = Agent(instructions="You tell the weather.")
    session = await make_session(agent, llm=model)
    (rt,) = model.live_sessions

    expected: list[tuple[str, str]] = []
    for n in range(turns):
        user_id = f"item_user_{n}"
        question = f"{QUESTION} ({n})"
        await voice_turn(
            session, agent, rt, user_id=user_id, question=question, transcript_when=transcript_when
        )
        expected += [("user", question), ("assistant", ANSWER)]

        seen = conversation(agent)
        assert [(role, text) for _, role, text in seen] == expected, seen
        ids = [item_id for item_id, _, _ in seen]
        assert len(ids) == len(set(ids)), f"an item is in the context twice: {seen}"
        assert ids[-2] == user_id, seen

    # what the session recorded: each message once, none empty
    history = [(i.role, i.text_content) for i in session.history.items if i.type == "message"]
    assert sorted(history) == sorted(expected), history
