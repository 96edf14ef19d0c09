"""An agent whose ``on_exit()`` ends the call with ``await session.aclose()`` does not hang."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from livekit.agents import Agent, AgentSession

from .fake_llm import FakeLLM

pytestmark = pytest.mark.unit

RUN_BOUND = 2.5


class HangsUp(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.exits = 0
        self.returned = asyncio.Event()

    async def on_exit(self) -> None:
        self.exits += 1
        await self.session.aclose()
        self.returned.set()


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the billing desk.")
        self.entered = False

    async def on_enter(self) -> None:
        self.entered = True


@pytest.mark.parametrize("exit_for", ["update_agent", "aclose", "shutdown"])
async def test_on_exit_awaiting_session_aclose(exit_for: str) -> None:
    desk = HangsUp()
    billing = Billing()
    session = AgentSession(llm=FakeLLM())
    closed = asyncio.Event()
    session.on("close", lambda _: closed.set())
    await session.start(desk)

    outer_close: asyncio.Future[None] | None = None
    if exit_for == "update_agent":
        session.update_agent(billing)
    elif exit_for == "aclose":
        outer_close = asyncio.ensure_future(session.aclose())
    else:
        session.shutdown()

    close_wait = asyncio.ensure_future(closed.wait())
    await asyncio.wait({close_wait}, timeout=RUN_BOUND)
    returned = desk.returned.is_set()
    closed_in_time = closed.is_set()
    if not closed_in_time:
        # on_exit() runs inside a drain that waits for it, and its close waits for that drain:
        # cancel on_exit so the session can close, and the failure reported is the assertion
        close_wait.cancel()
        for task in asyncio.all_tasks():
            if task.get_name() == "AgentTask_on_exit":
                task.cancel()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(session.aclose(), timeout=5)
        # the handoff or the close that awaited on_exit does not end with it: end what is left
        # of the session, so the failure reported is the assertion
        leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait(leftovers, timeout=5)

    assert returned, f"session.aclose() from on_exit() never returned (exiting for {exit_for})"
    assert closed_in_time, f"the session never closed (on_exit() awaited aclose(), {exit_for})"
    if outer_close is not None:
        await asyncio.wait_for(outer_close, timeout=5)
    # a close already under way or started from on_exit() is over once this one returns
    await asyncio.wait_for(session.aclose(), timeout=5)
    if (handoff := session._update_activity_atask) is not None:
        # the handoff on_exit() was called for ends once the close let it go
        await asyncio.wait_for(handoff, timeout=5)
    assert desk.exits == 1
    # the close started from on_exit() wins over the handoff on_exit() was called for
    assert not billing.entered
