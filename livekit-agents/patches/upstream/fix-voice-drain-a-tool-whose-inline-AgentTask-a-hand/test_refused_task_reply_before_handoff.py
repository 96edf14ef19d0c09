"""A tool whose inline AgentTask a handoff refuses is answered before the handoff moves on."""

from __future__ import annotations

import asyncio
import logging
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


class FormTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="You collect the form.")

    async def on_enter(self) -> None:
        self.complete("form filed")


class Desk(Agent):
    def __init__(self, instructions: str) -> None:
        super().__init__(instructions=instructions)
        self.tool_waiting = asyncio.Event()
        self.release_tool = asyncio.Event()
        self.exiting = asyncio.Event()

    async def on_exit(self) -> None:
        self.exiting.set()

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        self.tool_waiting.set()
        await self.release_tool.wait()
        return await FormTask()


async def test_tool_refused_by_a_handoff_is_answered_on_the_leaving_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="livekit.agents")
    model = AnsweringModel(
        [[FunctionCall(call_id="call_1", name="open_form", arguments="{}")]],
        auto_tool_reply_generation=False,
    )
    desk = Desk("You are the front desk.")
    async with AgentSession(llm=model) as session:
        await session.start(desk)
        run = session.run(user_input="I need to fill in a form.")
        await asyncio.wait_for(desk.tool_waiting.wait(), timeout=5)

        # the application moves the conversation on while the desk's tool runs
        new_desk = Desk("You are the new front desk.")
        session.update_agent(new_desk)
        await asyncio.wait_for(desk.exiting.wait(), timeout=5)
        # only now does the tool await its task: refused, a transition is under way
        desk.release_tool.set()
        await asyncio.wait_for(run, timeout=5)
        await asyncio.wait_for(session.wait_for_idle(), timeout=5)

        assert session.current_agent is new_desk
        [output] = [
            i
            for i in session.history.items
            if i.type == "function_call_output" and i.name == "open_form"
        ]
        assert output.is_error

        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == []
        # the desk's reply to its call was asked of a live realtime session, with the output
        last_request = model.requests[-1]
        assert last_request[2] is False, "a reply was asked of a closed realtime session"
        assert any(
            i.type == "function_call_output" and i.call_id == "call_1"
            for i in last_request[1].items
        )
