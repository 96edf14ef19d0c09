"""A realtime agent's tool whose inline AgentTask a session close refuses ends quietly."""

from __future__ import annotations

import asyncio
import logging

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, ToolError, function_tool
from livekit.agents.llm import FunctionCall

from .fake_answering_realtime import AnsweringModel

pytestmark = pytest.mark.unit


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
