"""An inline AgentTask that returns to an agent the session has left: the tool that awaited it
gets its result and that agent exits, instead of the tool waiting for itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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

RUN_BOUND = 2.5


class AnsweringSession(FakeRealtimeSession):
    """Answers each reply request at once: with the next scripted function calls, if any."""

    def __init__(self, model: AnsweringModel) -> None:
        super().__init__(model)
        self._answering_model = model

    async def aclose(self) -> None:
        if (hook := self._answering_model.on_first_close) is not None:
            self._answering_model.on_first_close = None
            hook()
        await super().aclose()

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
        self.on_first_close: Callable[[], None] | None = None

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
        _release_self_wait()
    await asyncio.wait_for(run_task, timeout=5)
    await asyncio.wait_for(other.entered.wait(), timeout=5)
    await asyncio.wait_for(session.aclose(), timeout=5)

    assert returned, "session.run() never returned: the tool waits for itself"
    assert session.current_agent is other
    # the desk's tool got the task's result, and the desk exited
    assert desk.results == ["record 1"]
    assert desk.exits == 1


def _release_self_wait() -> None:
    """Where this fails, the desk's tool awaits a gather of its own task, which nothing ends
    (cancelling it recurses): end that gather, so the session can close and the failure
    reported is the assertion, not the leftover tasks."""
    for task in asyncio.all_tasks():
        waiter = getattr(task, "_fut_waiter", None)
        if task.get_name() == "tool_exec_look_up" and waiter is not None and not waiter.done():
            waiter.set_result([])
