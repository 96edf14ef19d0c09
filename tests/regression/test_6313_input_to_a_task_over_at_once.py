"""User input while an inline AgentTask starts that completes in its own ``on_enter()`` (it
already knows its answer): the task is over before it could answer, so the agent that
awaited it, which resumes right after, answers (closest upstream issue: livekit/agents#6313).

On stock 1.8.9 the input given while the task's toolsets set up raises "AgentSession is
closing, cannot use generate_reply()". It must be answered once, by the agent the task
returns to, and be in the history once.
"""

from __future__ import annotations

from typing import Any

import livekit.agents
import pytest
from livekit.agents import function_tool

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    JournalingTask,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    spoken,
    tool_call,
)
from tests.fakes.desks import SlowSetup
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug(
    "livekit/agents#6313",
    raises=RuntimeError,
    match=r"AgentSession is closing, cannot use generate_reply",
)

ON_FORK = "+fork" in livekit.agents.__version__

DESK = "You are the front desk."
CHECK = "You check the account."
CHECK_IT = "Check my account."
TYPED = "My account number is 42."


class CheckTask(JournalingTask[str]):
    async def on_enter(self) -> None:
        await super().on_enter()
        self.complete("account ok")


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, gate: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.gate = gate

    @function_tool
    async def check_account(self) -> str:
        """Check the caller's account."""
        result = await CheckTask(
            self.journal,
            name="check",
            instructions=CHECK,
            tools=[SlowSetup(self.gate, id="slow_setup_check")],
        )
        self.journal.results.append(result)
        return result


@BUG
@pytest.mark.xfail(
    ON_FORK,
    strict=True,
    reason=(
        "0009/0016: _start_handoff_input() starts the input on the task's activity right after "
        "start(), before its on_enter ran and completed it; the reply is queued there and generated "
        "while the activity drains, after the task's on_exit began"
    ),
)
async def test_input_while_a_task_that_completes_at_once_starts_is_answered_by_its_caller(
    make_session: MakeSession,
) -> None:
    journal = fakes.Journal()
    gate = Gate("check starting")

    seen: list[Any] = []

    def answer(call: LLMCall) -> Reply:
        seen.append((call.instructions, call.last_user_text, call.tool_choice, tuple(journal.events)))
        if call.last_user_text == CHECK_IT and call.tool_choice != "none" and call.instructions == DESK:
            if not any(i.type == "function_call_output" for i in call.chat_ctx.items):
                return Reply(tool_calls=[tool_call("check_account")])
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    fake = ScriptedLLM([], fallback=answer)
    desk = Desk(journal, gate)
    session = await make_session(desk, llm=fake)

    session.generate_reply(user_input=CHECK_IT)
    async with gate.held():
        handle = session.generate_reply(user_input=TYPED)
    await bounded(handle, what="the reply to the input")
    await settled_on(session, desk)

    assert journal.results == ["account ok"]
    assert not handle.interrupted
    assert user_messages(session, TYPED) == 1
    # the check asks for nothing once its on_exit began; the desk, resumed, answers
    assert [i for i, _, _, events in seen if "exit check" in events and i == CHECK] == []
    assert [i for i, text, choice, _ in seen if text == TYPED and choice != "none"] == [DESK]
    assert spoken(session).count(f"{DESK} answers: {TYPED}") == 1
    assert journal.events == ["enter desk", "enter check", "exit check"]
