"""User input while an inline AgentTask starts whose ``on_enter()`` awaits something quick (a
cached lookup, answered within a turn or three of the event loop) and then completes (closest
upstream issue: livekit/agents#6313).

Unlike a task that completes at once (test_6313_input_to_a_task_over_at_once.py, where the
agent that awaited it answers), this task runs when its input is started and begins answering
it before it completes: it answers, or, had it not begun, the agent it returns to does. Either
way the input is answered once and in the history once, and the task asks its model nothing
once its ``on_exit`` began. Stock raises "AgentSession is closing, cannot use generate_reply()".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import function_tool

from tests import fakes
from tests.fakes import Gate, MakeSession, ScriptedLLM, bounded, spoken
from tests.fakes.desks import SlowSetup
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_6313_input_to_a_task_over_at_once import (
    BUG,
    CHECK,
    CHECK_IT,
    DESK,
    TYPED,
    CheckTask,
    Desk,
    answer_with,
)


async def quick_lookup(steps: int) -> str:
    """An awaited lookup answered within ``steps`` turns of the event loop (a cache hit)."""
    loop = asyncio.get_running_loop()
    for _ in range(steps):
        fut: asyncio.Future[None] = loop.create_future()
        loop.call_soon(fut.set_result, None)
        await fut
    return "account ok"


class LookupCheckTask(CheckTask):
    def __init__(self, *args: Any, steps: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.steps = steps

    async def on_enter(self) -> None:
        await super(CheckTask, self).on_enter()  # the journal entry, not CheckTask's complete()
        self.complete(await quick_lookup(self.steps))


class LookupDesk(Desk):
    steps = 1

    @function_tool
    async def check_account(self) -> str:
        """Check the caller's account."""
        result = await LookupCheckTask(
            self.journal,
            name="check",
            instructions=CHECK,
            tools=[SlowSetup(self.gate, id="slow_setup_check")],
            steps=self.steps,
        )
        self.journal.results.append(result)
        return result


@BUG
@pytest.mark.parametrize("steps", [1, 3])
async def test_input_while_a_task_that_completes_after_a_quick_await_starts_is_answered_once(
    make_session: MakeSession, steps: int
) -> None:
    journal = fakes.Journal()
    gate = Gate("check starting")
    seen: list[Any] = []
    desk = LookupDesk(journal, gate)
    desk.steps = steps
    session = await make_session(desk, llm=ScriptedLLM([], fallback=answer_with(journal, seen)))

    session.generate_reply(user_input=CHECK_IT)
    async with gate.held():
        handle: Any = session.generate_reply(user_input=TYPED)
    await bounded(handle, what="the reply to the input")
    await settled_on(session, desk)

    assert not handle.interrupted
    assert journal.results == ["account ok"]
    assert user_messages(session, TYPED) == 1
    assert journal.events == ["enter desk", "enter check", "exit check"]
    # the check asks for nothing once its on_exit began
    assert [i for i, _, _, events in seen if "exit check" in events and i == CHECK] == [], seen
    # answered once, by the check or the desk
    answered_by = [i for i, said, choice, _ in seen if said == TYPED and choice != "none"]
    assert len(answered_by) == 1 and answered_by[0] in (CHECK, DESK), seen
    assert spoken(session).count(f"{answered_by[0]} answers: {TYPED}") == 1, spoken(session)
