"""A realtime agent's tool whose inline AgentTask a session close refuses ends quietly."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, ToolError, function_tool, utils
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


class FormTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="You collect the form.")

    async def on_enter(self) -> None:
        if not self.done():  # the close may have ended the task already
            self.complete("form filed")


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.started = asyncio.Event()
        self.tool_got: list[object] = []

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        self.started.set()
        try:
            answer = await FormTask()
        except ToolError as e:
            self.tool_got.append(e)
            raise
        self.tool_got.append(answer)
        return answer


async def test_session_closing_as_a_task_starts_logs_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="livekit.agents")
    model = AnsweringModel([[FunctionCall(call_id="call_1", name="open_form", arguments="{}")]])
    desk = Desk()
    session = AgentSession(llm=model)
    await session.start(desk)
    run = session.run(user_input="I'd like to file a form.")
    await asyncio.wait_for(desk.started.wait(), timeout=5)

    # the application closes the session as the tool starts the task
    await asyncio.wait_for(session.aclose(), timeout=5)
    [outcome] = await asyncio.wait_for(asyncio.gather(run, return_exceptions=True), timeout=5)

    # the tool is told why, and the run ends with the session, quietly
    assert len(desk.tool_got) == 1 and isinstance(desk.tool_got[0], ToolError)
    assert not isinstance(outcome, ToolError), outcome
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
