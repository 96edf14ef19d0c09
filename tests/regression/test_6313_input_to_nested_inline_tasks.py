"""User input while an inline AgentTask starts whose ``on_enter()`` awaits a second inline task
that completes at once in its own ``on_enter()`` (it knows its answer): the inner task is over
before it could answer, the outer one, resumed, runs on and answers, once; nobody asks its
model anything after its ``on_exit`` began (closest upstream issue: livekit/agents#6313).
Stock raises "AgentSession is closing, cannot use generate_reply()".
"""

from __future__ import annotations

from typing import Any

from livekit.agents import function_tool

from tests import fakes
from tests.fakes import Gate, JournalingTask, MakeSession, ScriptedLLM, bounded, spoken
from tests.fakes.desks import SlowSetup
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on
from tests.regression.test_6313_input_to_a_task_over_at_once import (
    BUG,
    CHECK,
    CHECK_IT,
    TYPED,
    CheckTask,
    Desk,
    answer_with,
)

VERIFY = "You verify the caller."


class Verify(JournalingTask[str]):
    """Awaits the check (which completes at once) in its on_enter, then runs on."""

    async def on_enter(self) -> None:
        await super().on_enter()
        self.journal.results.append(await CheckTask(self.journal, name="check", instructions=CHECK))


class NestingDesk(Desk):
    @function_tool
    async def check_account(self) -> str:
        """Check the caller's account."""
        self.verify = Verify(
            self.journal, name="verify", instructions=VERIFY, tools=[SlowSetup(self.gate, id="slow_setup_v")]
        )
        return await self.verify


@BUG
async def test_input_while_a_task_starts_that_awaits_one_over_at_once_is_answered_once(
    make_session: MakeSession,
) -> None:
    journal = fakes.Journal()
    gate = Gate("verify starting")
    seen: list[Any] = []
    desk = NestingDesk(journal, gate)
    session = await make_session(desk, llm=ScriptedLLM([], fallback=answer_with(journal, seen)))

    session.generate_reply(user_input=CHECK_IT)
    async with gate.held():
        handle: Any = session.generate_reply(user_input=TYPED)
    await bounded(handle, what="the reply to the input")
    await bounded(journal.entered["verify"].wait(), what="verify's on_enter")
    await settled_on(session, desk.verify)

    assert not handle.interrupted
    assert journal.results == ["account ok"]
    assert user_messages(session, TYPED) == 1
    assert journal.events == ["enter desk", "enter verify", "enter check", "exit check"]
    # the check asks for nothing once its on_exit began (nor ever: it was over at once)
    assert [i for i, _, _, _ in seen if i == CHECK] == [], seen
    answered_by = [i for i, said, choice, _ in seen if said == TYPED and choice != "none"]
    assert answered_by == [VERIFY], seen
    assert spoken(session).count(f"{VERIFY} answers: {TYPED}") == 1, spoken(session)

    desk.verify.complete("verified")
    await settled_on(session, desk)
    assert journal.events[-1] == "exit verify"
