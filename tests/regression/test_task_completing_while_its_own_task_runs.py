"""An inline ``AgentTask`` that completes while an inline task of its own runs.

The desk's tool awaits a verification task; while the verification task is still in its
``on_enter``, the caller asks it something and its tool awaits a lookup task of its own.
The verification task then completes (its ``on_enter`` had what it needed), while the lookup
runs. ``AgentTask.__await_impl()`` of the verification task found the session's agent
changed (the lookup task) and took it for ``update_agent()``: it handed nothing back, and
once the lookup completed, the session returned to the verification task, completed, for
good. The caller is left talking to a task that is over, the desk never resumes, and
``aclose()`` leaves that task's activity running (stock goes further astray: a
``RecursionError`` cancelling the chain).

The lookup is the verification task's own: once it hands back, the verification task hands
back to the desk, with its result.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import function_tool

from tests.fakes import (
    Gate,
    Journal,
    JournalingAgent,
    JournalingTask,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    tool_call,
)
from tests.fakes.session import settled_on

BUG = pytest.mark.upstream_bug(
    "not-yet: an inline task completing while its own inline task runs is never left"
)

DESK = "You are the front desk."
VERIFY = "You verify the caller."
LOOKUP = "You look the record up."
CHECK_ME = "Please check who I am."
FIND_IT = "Find my record."
RUN_BOUND = 2.0


class Lookup(JournalingTask[str]):
    def __init__(self, journal: Journal, gate: Gate) -> None:
        super().__init__(journal, name="lookup", instructions=LOOKUP)
        self.gate = gate

    async def on_enter(self) -> None:
        await super().on_enter()
        await self.gate.wait()
        self.complete("record 7")


class Verify(JournalingTask[str]):
    def __init__(self, journal: Journal, gate: Gate, lookup_gate: Gate) -> None:
        super().__init__(journal, name="verify", instructions=VERIFY)
        self.gate = gate
        self.lookup_gate = lookup_gate
        self.completed = asyncio.Event()

    async def on_enter(self) -> None:
        await super().on_enter()
        await self.gate.wait()
        self.complete("verified")
        self.completed.set()

    @function_tool
    async def find_record(self) -> str:
        """Find the caller's record."""
        result = await Lookup(self.journal, self.lookup_gate)
        self.journal.results.append(result)
        return result


class Desk(JournalingAgent):
    def __init__(self, journal: Journal, verify: Verify) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.verify = verify

    @function_tool
    async def verify_caller(self) -> str:
        """Verify the caller."""
        result = await self.verify
        self.journal.results.append(result)
        return result


def answer(call: LLMCall) -> Reply:
    last = call.chat_ctx.items[-1] if call.chat_ctx.items else None
    if last is not None and last.type == "function_call_output":
        return Reply(f"{call.instructions} got {last.output}")
    if call.instructions == DESK and call.last_user_text == CHECK_ME:
        return Reply(tool_calls=[tool_call("verify_caller")])
    if call.instructions == VERIFY and call.last_user_text == FIND_IT:
        return Reply(tool_calls=[tool_call("find_record")])
    return Reply(f"{call.instructions} answers: {call.last_user_text}")


@BUG
async def test_a_task_completing_while_its_own_task_runs_hands_back_once_that_one_is_done(
    make_session: MakeSession,
) -> None:
    journal = Journal()
    verified, found = Gate("verify's on_enter"), Gate("lookup's on_enter")
    verify = Verify(journal, verified, found)
    desk = Desk(journal, verify)
    session: Any = await make_session(desk, llm=ScriptedLLM([], fallback=answer))

    session.generate_reply(user_input=CHECK_ME)
    try:
        await verified.reached()
        # the caller asks the verification task, still in its on_enter: its tool awaits the lookup
        session.generate_reply(user_input=FIND_IT)
        await found.reached()
        # the verification task completes while the lookup runs, then the lookup does
        verified.open()
        await bounded(verify.completed.wait(), what="verify completing")
        found.open()
        await bounded(journal.exited["lookup"].wait(), what="lookup's on_exit")
    finally:
        verified.open()
        found.open()
    # the verification task hands back once the lookup did (stock never does: bounded, then
    # the assertion says where the session stayed)
    handed_back = asyncio.ensure_future(verify._wait_for_inactive())
    await asyncio.wait({handed_back}, timeout=RUN_BOUND)
    handed_back.cancel()

    # the bug: the session stays with the verification task, over, and the desk never resumes
    assert session.current_agent is desk, f"the session stays with {session.current_agent.id}"
    await settled_on(session, desk)
    assert journal.results == ["record 7", "verified"]
    assert journal.events == [
        "enter desk",
        "enter verify",
        "enter lookup",
        "exit lookup",
        "exit verify",
    ]
