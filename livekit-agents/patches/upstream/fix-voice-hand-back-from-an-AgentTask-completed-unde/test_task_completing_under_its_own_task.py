"""An inline AgentTask that completes while an inline task of its own still runs hands back
to the agent that awaited it once that inner task is done."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, function_tool
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

CHECK_ME = "Please check who I am."
FIND_IT = "Find my record."


class Lookup(AgentTask[str]):
    def __init__(self, events: list[str], entered: asyncio.Event, go: asyncio.Event) -> None:
        super().__init__(instructions="You look the record up.")
        self.events = events
        self.entered = entered
        self.go = go

    async def on_enter(self) -> None:
        self.events.append("enter lookup")
        self.entered.set()
        await self.go.wait()
        self.complete("record 7")

    async def on_exit(self) -> None:
        self.events.append("exit lookup")


class Verify(AgentTask[str]):
    def __init__(self, events: list[str], results: list[str]) -> None:
        super().__init__(instructions="You verify the caller.")
        self.events = events
        self.results = results
        self.entered = asyncio.Event()
        self.go = asyncio.Event()
        self.lookup_entered = asyncio.Event()
        self.lookup_go = asyncio.Event()
        self.completed = asyncio.Event()

    async def on_enter(self) -> None:
        self.events.append("enter verify")
        self.entered.set()
        await self.go.wait()
        self.complete("verified")
        self.completed.set()

    async def on_exit(self) -> None:
        self.events.append("exit verify")

    @function_tool
    async def find_record(self) -> str:
        """Find the caller's record."""
        result = await Lookup(self.events, self.lookup_entered, self.lookup_go)
        self.results.append(result)
        return result


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.events: list[str] = []
        self.results: list[str] = []
        self.verify = Verify(self.events, self.results)
        self.resumed = asyncio.Event()

    async def on_enter(self) -> None:
        self.events.append("enter desk")

    @function_tool
    async def verify_caller(self) -> str:
        """Verify the caller."""
        result = await self.verify
        self.results.append(result)
        self.resumed.set()
        return result


def _respond(text: str, name: str) -> FakeLLMResponse:
    call = FunctionToolCall(name=name, arguments="{}", call_id=f"call_{name}")
    return FakeLLMResponse(input=text, content="", ttft=0, duration=0, tool_calls=[call])


async def test_task_completing_while_its_own_task_runs_hands_back() -> None:
    fake_llm = FakeLLM(
        fake_responses=[_respond(CHECK_ME, "verify_caller"), _respond(FIND_IT, "find_record")]
    )
    before = asyncio.all_tasks()
    desk = Desk()
    verify = desk.verify
    session = AgentSession(llm=fake_llm)
    await session.start(desk)
    try:
        session.generate_reply(user_input=CHECK_ME)
        await asyncio.wait_for(verify.entered.wait(), timeout=5)
        # the caller asks the verification task, still in its on_enter: its tool awaits a lookup
        session.generate_reply(user_input=FIND_IT)
        await asyncio.wait_for(verify.lookup_entered.wait(), timeout=5)
        # the verification task completes while its lookup runs, then the lookup completes
        verify.go.set()
        await asyncio.wait_for(verify.completed.wait(), timeout=5)
        verify.lookup_go.set()
        # the desk resumes once both tasks handed back (bounded: where they do not, the
        # assertions below say where the session stayed)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(desk.resumed.wait(), timeout=3)

        assert session.current_agent is desk, "the session stays with a task that completed"
        assert desk.results == ["record 7", "verified"]
        assert desk.events == [
            "enter desk",
            "enter verify",
            "enter lookup",
            "exit lookup",
            "exit verify",
        ]
    finally:
        verify.go.set()
        verify.lookup_go.set()
        if not desk.resumed.is_set():
            _release_self_wait()
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(session.aclose(), timeout=5)
        await _cancel_leftovers(before)


def _release_self_wait() -> None:
    """Where the task never hands back, closing its activity from the desk's tool awaits a
    gather of that tool's own task, which nothing ends (cancelling it recurses): end that
    gather, so that the session can close and the failure reported is the assertion."""
    for task in asyncio.all_tasks():
        waiter = getattr(task, "_fut_waiter", None)
        if task.get_name().startswith("tool_exec_") and waiter is not None and not waiter.done():
            if isinstance(waiter, asyncio.Future) and type(waiter).__name__ == "_GatheringFuture":
                waiter.set_result([])


async def _cancel_leftovers(before: set[asyncio.Task[object]]) -> None:
    """Where the task never hands back, closing the session leaves its activity running:
    cancel what is left, so that the failure reported is the assertion, not leaked tasks."""
    current = asyncio.current_task()
    for _ in range(3):
        left = [t for t in asyncio.all_tasks() - before if t is not current and not t.done()]
        if not left:
            return
        for task in left:
            with contextlib.suppress(RecursionError):
                task.cancel()
        await asyncio.wait(left, timeout=2)
