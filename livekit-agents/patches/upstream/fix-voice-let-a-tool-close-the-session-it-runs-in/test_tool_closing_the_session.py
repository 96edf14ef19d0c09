"""A tool that ends the call with ``await session.aclose()`` does not wait for itself."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.llm import FunctionToolCall
from livekit.agents.voice import SpeechHandle

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

RUN_BOUND = 2.5


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
