"""livekit/agents#4746 (closest related): the application calls ``session.update_agent()``
while one of an agent's two parallel tool calls is starting an inline ``AgentTask``, and the
other call waits its turn to start one too (the agent's activity lets one inline task at a
time pause it).

The first task runs and completes, finds the session on another agent ("<task> completed,
but the agent has changed in the meantime") and closes the agent that awaited it. Closing
that agent's activity waits for its running tools: stock 1.8.9 waits for the closing tool
itself (see test_4746_update_agent_while_task_starts.py); with that fixed, it still waits for
the sibling tool, which waits for the first tool to give up its turn at the inline-task slot,
and the first tool holds that turn until the close returns. ``run()`` never returns, neither
call gets an output and ``aclose()`` hangs. Seen with Nova Sonic in the stress harness (seed
18), which splits parallel calls over speeches of their own; the scripted model with both
calls in one speech waits the same way.

The fork closes the left agent's activity once the first tool has given up the slot, and
marks the activity as handing over first, so the sibling is refused the slot with a tool
error instead of pausing an agent that is leaving.
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

BUG = pytest.mark.upstream_bug(
    "livekit/agents#4746", raises=BoundedWaitTimeout, match=r"for session\.run\(\)$"
)

DESK = "You are the front desk."
OTHER = "You are the other desk."
RUN_BOUND = 2.5
TRANSITION = "An agent transition is in progress"


class LookupTask(JournalingTask[str]):
    def __init__(self, journal: Journal, n: int) -> None:
        super().__init__(journal, name=f"lookup {n}", instructions="You look up a record.")
        self.n = n

    async def on_enter(self) -> None:
        await super().on_enter()
        self.complete(f"record {self.n}")


class Named(JournalingAgent):
    """An agent that only journals its on_enter / on_exit."""


class Desk(Named):
    @function_tool
    async def look_up(self, n: int) -> str:
        """Look up record n."""
        result = await LookupTask(self.journal, n)
        self.journal.results.append(result)
        return result


def speaking(gen: RTGeneration) -> str:
    return f"{gen.instructions} speaking"


@BUG
async def test_the_queued_sibling_is_refused_and_the_run_returns(make_session: MakeSession) -> None:
    # on_first_close runs as the desk's realtime session closes: a model that cannot be updated
    # closes it while the desk is paused for the task
    model = FirstCloseHookModel(
        [
            Reply(
                tool_calls=[
                    tool_call("look_up", {"n": 1}, call_id="first"),
                    tool_call("look_up", {"n": 2}, call_id="second"),
                ]
            )
        ],
        fallback=speaking,
        reuse=False,
    )
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK)
    other = Named(journal, name="other", instructions=OTHER)
    session = await make_session(desk, llm=model)
    # the application hands off while the desk is being paused for the first task
    model.on_first_close = lambda: session.update_agent(other)

    await bounded(session.run(user_input="look both up"), RUN_BOUND, what="session.run()")

    assert session.current_agent is other
    outputs = {item.call_id: item for item in session.history.items if item.type == "function_call_output"}
    # each call has its output: the first the task's result, the second a refusal (its
    # agent is leaving), and the second task never ran
    assert sorted(outputs) == ["first", "second"]
    assert outputs["first"].output == "record 1" and not outputs["first"].is_error
    assert outputs["second"].is_error and TRANSITION in outputs["second"].output
    assert journal.results == ["record 1"]
    assert journal.events == ["enter desk", "enter lookup 1", "exit lookup 1", "exit desk", "enter other"]

    await bounded(session.run(user_input="hello"), RUN_BOUND, what="session.run() after the handoff")
    assert model.generations[-1].instructions == OTHER
    await bounded(session.aclose(), what="AgentSession.aclose")
    assert journal.events[-1] == "exit other"
