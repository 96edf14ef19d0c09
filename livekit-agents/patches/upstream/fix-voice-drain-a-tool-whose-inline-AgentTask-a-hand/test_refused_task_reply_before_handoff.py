"""A tool whose inline AgentTask a handoff refuses is answered before the handoff moves on."""

from __future__ import annotations

import asyncio
import logging

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, function_tool
from livekit.agents.llm import FunctionCall

from .fake_answering_realtime import AnsweringModel

pytestmark = pytest.mark.unit


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
