"""Input the session closes on is recorded, and the closing agent does not answer it after its
on_exit() began."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable

import pytest

from livekit.agents import Agent, AgentSession, ModelSettings, llm

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

GOODBYE = "Say goodbye."
LAST_WORDS = "Wait, one more thing."


def _last_user_text(chat_ctx: llm.ChatContext) -> str | None:
    for item in reversed(chat_ctx.items):
        if item.type == "message" and item.role == "user":
            return item.text_content
    return None


class Desk(Agent):
    """Holds its on_exit() until released; records which user message each request answers."""

    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.answered: list[str | None] = []
        self.exiting = asyncio.Event()
        self.exit_gate = asyncio.Event()
        self.goodbye_in_on_exit = False

    async def on_exit(self) -> None:
        self.exiting.set()
        await self.exit_gate.wait()
        if self.goodbye_in_on_exit:
            # a goodbye asked for in on_exit() itself still plays on close
            await self.session.generate_reply(user_input=GOODBYE)

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[llm.ChatChunk | str]:
        self.answered.append(_last_user_text(chat_ctx))
        async for chunk in Agent.default.llm_node(self, chat_ctx, tools, model_settings):
            yield chunk


def _fake_llm() -> FakeLLM:
    return FakeLLM(
        fake_responses=[
            FakeLLMResponse(input=LAST_WORDS, content="Sure.", ttft=0, duration=0),
            FakeLLMResponse(input=GOODBYE, content="Goodbye!", ttft=0, duration=0),
        ]
    )


async def test_input_during_the_closing_agents_on_exit_is_recorded_not_answered() -> None:
    desk = Desk()
    session = AgentSession(llm=_fake_llm())
    await session.start(desk)

    closing = asyncio.create_task(session.aclose())
    await asyncio.wait_for(desk.exiting.wait(), timeout=5)
    try:
        # the caller types as the session closes, while the desk's on_exit() runs
        session.generate_reply(user_input=LAST_WORDS)
    finally:
        desk.exit_gate.set()
    await asyncio.wait_for(closing, timeout=5)

    users = [
        i
        for i in session.history.items
        if i.type == "message" and i.role == "user" and i.text_content == LAST_WORDS
    ]
    assert len(users) == 1, "the input the session closed on is not in the history"
    assert LAST_WORDS not in desk.answered, "the closing agent answered after its on_exit() began"


async def test_a_goodbye_asked_for_in_on_exit_still_plays() -> None:
    desk = Desk()
    desk.goodbye_in_on_exit = True
    desk.exit_gate.set()
    session = AgentSession(llm=_fake_llm())
    await session.start(desk)

    await asyncio.wait_for(session.aclose(), timeout=5)

    assert desk.answered == [GOODBYE]
    replies = [
        i.text_content
        for i in session.history.items
        if i.type == "message" and i.role == "assistant"
    ]
    assert replies == ["Goodbye!"]
