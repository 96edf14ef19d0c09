"""A run lasts until the agent answered the result of an inline AgentTask that completed at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, function_tool, utils
from livekit.agents.llm import (
    ChatContext,
    FunctionCall,
    GenerationCreatedEvent,
    MessageGeneration,
)

from .fake_realtime import FakeRealtimeModel, FakeRealtimeSession, fake_capabilities

pytestmark = pytest.mark.unit


class AnsweringSession(FakeRealtimeSession):
    """Answers each reply request at once: with the next scripted function calls, if any."""

    def __init__(self, model: AnsweringModel) -> None:
        super().__init__(model)
        self._answering_model = model

    def generate_reply(self, **kwargs: Any) -> asyncio.Future[GenerationCreatedEvent]:
        fut = super().generate_reply(**kwargs)
        model = self._answering_model
        model.requests.append((self, self.chat_ctx.copy(), self.closed))
        calls = model.script.pop(0) if model.script else []
        fut.set_result(_generation(calls, response_id=f"response-{len(model.requests)}"))
        return fut


class AnsweringModel(FakeRealtimeModel):
    def __init__(self, script: list[list[FunctionCall]], **capabilities: bool) -> None:
        super().__init__(capabilities=fake_capabilities(**capabilities))
        self.script = script
        self.requests: list[tuple[FakeRealtimeSession, ChatContext, bool]] = []

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = AnsweringSession(self)
        self.created_sessions.append(sess)
        return sess


def _generation(calls: list[FunctionCall], *, response_id: str) -> GenerationCreatedEvent:
    message_ch = utils.aio.Chan[MessageGeneration]()
    message_ch.close()
    function_ch = utils.aio.Chan[FunctionCall]()
    for call in calls:
        function_ch.send_nowait(call)
    function_ch.close()
    return GenerationCreatedEvent(
        message_stream=message_ch,
        function_stream=function_ch,
        user_initiated=True,
        response_id=response_id,
    )


class LookupTask(AgentTask[str]):
    """An inline task that already knows its answer: it completes in its on_enter."""

    def __init__(self, n: int) -> None:
        super().__init__(instructions=f"You look up record {n}.")
        self.n = n

    async def on_enter(self) -> None:
        self.complete(f"record {self.n}")


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.results: list[str] = []

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        result = await LookupTask(len(self.results) + 1)
        self.results.append(result)
        return result


def _look_up(n: int) -> list[FunctionCall]:
    return [FunctionCall(call_id=f"call_{n}", name="look_up", arguments="{}")]


async def test_consecutive_tasks_each_answered_before_run_returns() -> None:
    # each turn: the model calls look_up, then answers its output
    model = AnsweringModel(
        [_look_up(1), [], _look_up(2), []],
        auto_tool_reply_generation=False,
    )
    desk = Desk()
    async with AgentSession(llm=model) as session:
        await session.start(desk)

        for n in (1, 2):
            await asyncio.wait_for(session.run(user_input=f"Look up record {n}."), timeout=5)

            # the run returns once the desk got the task's result and asked for its answer
            assert desk.results == [f"record {i}" for i in range(1, n + 1)]
            assert len(model.requests) == 2 * n
            assert session.current_agent is desk
