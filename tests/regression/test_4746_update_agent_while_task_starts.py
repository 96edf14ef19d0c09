"""livekit/agents#4746 (closest related; no upstream issue names this exact race): the
application calls ``session.update_agent()`` while an agent's tool is starting an inline
``AgentTask``, before the task's activity took over.

No inline task is current yet, so the handoff ends none; the task runs and completes, and
its await finds the session on another agent: "<task> completed, but the agent has changed
in the meantime", and it closes the agent that awaited it. Stock 1.8.9 closes that agent's
activity from inside that agent's own tool, and ``AgentActivity.aclose()`` waits for the
activity's running tools, the closing one included: the tool waits for itself. ``run()``
never returns, the tool never gets the task's result, and tearing the event loop down
recurses through the cancellation of that self-wait until ``RecursionError`` (the stress
harness's seeds 763, 831, 867 on stock, 1315 on the fork). The fork's tool executor never
waits for (nor cancels) the tool that closes it, and the left agent exits as an agent
handed off from does. The task's result, recorded in the history, goes to the agent now in
charge, as an async tool's result that comes back during a handoff does.
"""

from __future__ import annotations

import pytest
from livekit.agents import function_tool

from tests.fakes import (
    BoundedWaitTimeout,
    FirstCloseHookModel,
    Journal,
    JournalingAgent,
    JournalingTask,
    MakeSession,
    Reply,
    RTGeneration,
    bounded,
    tool_call,
)

# the bug is the hang itself: nothing else shows until the run's wait runs out
BUG = pytest.mark.upstream_bug(
    "livekit/agents#4746", raises=BoundedWaitTimeout, match=r"for session\.run\(\)$"
)

DESK = "You are the front desk."
OTHER = "You are the other desk."
RUN_BOUND = 2.5


class LookupTask(JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="lookup", instructions="You look up a record.")

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


def speaking(gen: RTGeneration) -> str:
    return f"{gen.instructions} speaking"


@BUG
async def test_run_returns_and_the_left_agent_exits(make_session: MakeSession) -> None:
    # on_first_close runs as the desk's realtime session closes: a model that cannot be updated
    # closes it while the desk is paused for the task
    model = FirstCloseHookModel(
        [Reply(tool_calls=[tool_call("look_up")])],
        fallback=speaking,
        reuse=False,
    )
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK)
    other = Named(journal, name="other", instructions=OTHER)
    session = await make_session(desk, llm=model)
    # the application hands off while the desk is being paused for the task
    model.on_first_close = lambda: session.update_agent(other)

    await bounded(session.run(user_input="look me up"), RUN_BOUND, what="session.run()")

    assert session.current_agent is other
    # the desk's tool got the task's result, and the desk left without answering it: the
    # other desk, now in charge, has the result in its model's context and answers it
    assert journal.results == ["record 1"]
    assert journal.events == ["enter desk", "enter lookup", "exit lookup", "exit desk", "enter other"]
    assert [g.instructions for g in model.generations] == [DESK, OTHER]
    assert any(
        item.type == "function_call_output" and item.output == "record 1"
        for item in model.generations[1].chat_ctx.items
    )

    await bounded(session.run(user_input="hello"), RUN_BOUND, what="session.run() after the handoff")
    assert model.generations[-1].instructions == OTHER
    await bounded(session.aclose(), what="AgentSession.aclose")
    assert journal.events[-1] == "exit other"
