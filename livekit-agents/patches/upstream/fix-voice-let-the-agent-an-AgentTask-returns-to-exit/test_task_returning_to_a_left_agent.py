"""An inline AgentTask that returns to an agent the session has left: the tool that awaited it
gets its result and that agent exits, instead of the tool waiting for itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, function_tool
from livekit.agents.llm import FunctionCall

from .fake_answering_realtime import AnsweringModel, release_tool_waiting_for_itself

pytestmark = pytest.mark.unit

RUN_BOUND = 2.5


class LookupTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="You look up a record.")

    async def on_enter(self) -> None:
        self.complete("record 1")


class Other(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the other desk.")
        self.entered = asyncio.Event()

    async def on_enter(self) -> None:
        self.entered.set()


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.results: list[str] = []
        self.exits = 0

    async def on_exit(self) -> None:
        self.exits += 1

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        result = await LookupTask()
        self.results.append(result)
        return result


async def test_update_agent_while_a_tool_starts_a_task() -> None:
    # a realtime session that cannot be updated: pausing the desk for the task closes it
    model = AnsweringModel(
        [[FunctionCall(call_id="call_1", name="look_up", arguments="{}")]],
        auto_tool_reply_generation=False,
        mutable_chat_context=False,
        mutable_instructions=False,
        mutable_tools=False,
    )
    desk = Desk()
    other = Other()
    session = AgentSession(llm=model)
    await session.start(desk)
    # the application hands off while the desk is being paused for the task
    model.on_first_close = lambda: session.update_agent(other)

    async def run() -> Any:
        return await session.run(user_input="Look me up.")

    run_task = asyncio.ensure_future(run())
    await asyncio.wait({run_task}, timeout=RUN_BOUND)
    returned = run_task.done()
    if not returned:
        release_tool_waiting_for_itself("look_up")
    await asyncio.wait_for(run_task, timeout=5)
    await asyncio.wait_for(other.entered.wait(), timeout=5)
    await asyncio.wait_for(session.aclose(), timeout=5)

    assert returned, "session.run() never returned: the tool waits for itself"
    assert session.current_agent is other
    # the desk's tool got the task's result, and the desk exited
    assert desk.results == ["record 1"]
    assert desk.exits == 1
