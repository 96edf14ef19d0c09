"""Review of "give the agent in charge the results of a tool its agent was left running", with a
pipeline LLM (its own test drives a realtime model only).

The application calls ``session.update_agent()`` while an agent's tool is starting an inline
``AgentTask``: here as the agent's activity is being paused for the task. The task completes
and the tool returns its result after the session went on with the other agent. That agent
has the result in its LLM's context and answers it; ``run()`` returns, and nothing is asked in
the voice of the agent that was left.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import function_tool
from livekit.agents.voice.agent_activity import AgentActivity

from tests.fakes import (
    BoundedWaitTimeout,
    Journal,
    JournalingAgent,
    JournalingTask,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    tool_call,
)

BUG = pytest.mark.upstream_bug(
    "livekit/agents#4746", raises=BoundedWaitTimeout, match=r"for session\.run\(\)$"
)

DESK = "You are the front desk."
OTHER = "You are the other desk."
TASK = "You look up a record."
RUN_BOUND = 2.5


class LookupTask(JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="lookup", instructions=TASK)

    async def on_enter(self) -> None:
        await super().on_enter()
        self.complete("record 1")


class Named(JournalingAgent):
    """An agent that only journals its on_enter / on_exit."""


class Desk(Named):
    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        result = await LookupTask(self.journal)
        self.journal.results.append(result)
        return result


@BUG
async def test_pipeline_agent_in_charge_answers_a_left_agent_s_tool(
    make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedLLM([Reply(tool_calls=[tool_call("look_up")])], fallback="ok")
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK)
    other = Named(journal, name="other", instructions=OTHER)
    session = await make_session(desk, llm=model)

    # the application hands off as the desk is being paused for the task
    pause = AgentActivity.pause
    handed_off: list[bool] = []

    async def _pause(self: AgentActivity, *args: Any, **kwargs: Any) -> None:
        if self.agent is desk and not handed_off:
            handed_off.append(True)
            session.update_agent(other)
        await pause(self, *args, **kwargs)

    monkeypatch.setattr(AgentActivity, "pause", _pause)

    await bounded(session.run(user_input="look me up"), RUN_BOUND, what="session.run()")

    assert handed_off, "the desk was never paused for the task"
    assert session.current_agent is other
    assert journal.results == ["record 1"]
    # nothing asked of the desk after the one request that called the tool
    desk_calls = [c for c in model.calls if c.instructions == DESK]
    assert len(desk_calls) == 1, [c.instructions for c in model.calls]
    # the agent in charge (which says nothing on enter) was asked to answer, with the result in
    # its context
    other_calls = [c for c in model.calls if c.instructions == OTHER]
    assert other_calls, "the agent in charge was never asked to answer the tool's result"
    assert any(
        item.type == "function_call_output" and item.output == "record 1"
        for item in other_calls[0].chat_ctx.items
    ), "the agent in charge never saw the tool's result"

    await bounded(session.aclose(), what="AgentSession.aclose")
