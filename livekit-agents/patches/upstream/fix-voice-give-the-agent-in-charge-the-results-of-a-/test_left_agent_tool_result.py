"""A tool whose agent the session left while the tool awaited an inline AgentTask: its result
goes to the agent the session went on with, which answers it."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, function_tool
from livekit.agents.llm import FunctionCall

from .fake_answering_realtime import AnsweringModel, release_tool_waiting_for_itself
from .fake_realtime import FakeRealtimeSession

pytestmark = pytest.mark.unit

# how long the agent in charge is given to answer the result; it does so at once when it can
ANSWER_BOUND = 2.5


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

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        return await LookupTask()


async def test_the_agent_in_charge_answers_the_result_of_a_left_agent_s_tool() -> None:
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
    desk_session = model.created_sessions[0]
    # the application hands off while the desk is being paused for the task
    model.on_first_close = lambda: session.update_agent(other)
    answered = asyncio.get_running_loop().create_future()

    def on_request(rt_session: FakeRealtimeSession) -> None:
        if rt_session is not desk_session and not answered.done():
            answered.set_result(None)

    model.on_request = on_request
    run_task = asyncio.ensure_future(session.run(user_input="Look me up."))
    await asyncio.wait_for(other.entered.wait(), timeout=5)
    await asyncio.wait({answered}, timeout=ANSWER_BOUND)
    if not run_task.done():
        release_tool_waiting_for_itself("look_up")
    await asyncio.wait_for(asyncio.gather(run_task, return_exceptions=True), timeout=5)
    outputs = [
        item.output
        for item in other.chat_ctx.items
        if item.type == "function_call_output" and item.call_id == "call_1"
    ]
    await asyncio.wait_for(session.aclose(), timeout=5)

    assert session.current_agent is other
    # the result is in the context of the agent in charge, and its model was asked to answer it
    assert outputs == ["record 1"], "the tool's result stayed with the desk the session left"
    assert answered.done(), "the agent in charge never answered the tool's result"
