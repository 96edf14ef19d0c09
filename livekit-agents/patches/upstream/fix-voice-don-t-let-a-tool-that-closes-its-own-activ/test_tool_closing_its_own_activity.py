"""A tool that closes its own activity does not wait for itself: one whose inline AgentTask
returns to an agent the session has left, and one that ends the call with
``await session.aclose()``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, function_tool, utils
from livekit.agents.llm import (
    ChatContext,
    FunctionCall,
    FunctionToolCall,
    GenerationCreatedEvent,
    MessageGeneration,
)
from livekit.agents.voice import SpeechHandle

from .fake_llm import FakeLLM, FakeLLMResponse
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


class EndsTheCall(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.returned = asyncio.Event()
        self.exits = 0

    async def on_exit(self) -> None:
        self.exits += 1

    @function_tool
    async def end_call(self) -> str:
        """End the call."""
        await self.session.aclose()
        self.returned.set()
        return "bye"


async def test_tool_awaiting_session_aclose() -> None:
    end_call = FunctionToolCall(name="end_call", arguments="{}", call_id="c1")
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(
                input="That's all.", content="", ttft=0, duration=0, tool_calls=[end_call]
            ),
            # the reply to the tool's result, should anything ask for one
            FakeLLMResponse(input="bye", content="Goodbye.", ttft=0, duration=0),
        ]
    )
    desk = EndsTheCall()
    session = AgentSession(llm=fake_llm)
    closed = asyncio.Event()
    session.on("close", lambda _: closed.set())
    speeches: list[SpeechHandle] = []
    session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))
    await session.start(desk)

    session.generate_reply(user_input="That's all.")
    close_wait = asyncio.ensure_future(closed.wait())
    await asyncio.wait({close_wait}, timeout=RUN_BOUND)
    returned = closed.is_set()
    if not returned:
        # the close waits for the tool's speech, which waits for the tool: cancel the tool so
        # the session can close, and the failure reported is the assertion
        close_wait.cancel()
        for task in asyncio.all_tasks():
            if task.get_name() == "tool_exec_end_call":
                task.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(session.aclose(), timeout=5)
        # the speech awaiting the tool and the close awaiting that speech do not end with it:
        # end what is left of the session, so the failure reported is the assertion
        leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait(leftovers, timeout=5)

    assert returned, "session.aclose() from a tool never completed: the close waits for the tool"
    await asyncio.wait_for(desk.returned.wait(), timeout=5)
    await asyncio.wait_for(
        asyncio.gather(*(speech.wait_for_playout() for speech in speeches)), timeout=5
    )
    assert desk.exits == 1
    # aclose() closes without draining, as shutdown(drain=False) does: the tool's speech is
    # interrupted, no reply is generated, and the tool's result is in the history
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [o.output for o in outputs] == ["bye"]
    assert not [i for i in session.history.items if i.type == "message" and i.role == "assistant"]
