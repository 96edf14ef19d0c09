"""livekit/agents#4115: a realtime agent whose tool awaits an inline ``AgentTask`` wedges the
session on the second such task.

The task completes itself in its ``on_enter`` (it already knows its answer). Stock 1.8.9 lets
``session.run()`` return as soon as that ``on_enter`` ends: the run had unwatched the
awaiting tool and its speech, and gets them back only once the parent resumed, which is
after the run is over. So the run returns before the agent that awaited the task got its
result and answered, and ``wait_for_idle()`` returns with the task's activity still current.
The next user turn then reaches the agent while its realtime reply to the first result waits
for the current speech to finish; that turn's tool awaits a second task, whose pause waits
for the reply in progress: the second task never starts, ``run()`` never returns, the tool
never gets its result and ``aclose()`` hangs. The fork gives the suspended tool and speech
back to the run as soon as the task completes, so the run returns once the agent answered.
"""

from __future__ import annotations

import pytest
from livekit.agents import function_tool

from tests.fakes import (
    Journal,
    JournalingAgent,
    JournalingTask,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    spoken,
    tool_call,
)

BUG = pytest.mark.upstream_bug("livekit/agents#4115")

DESK = "You are the front desk."
RUN_BOUND = 2.5


class LookupTask(JournalingTask[str]):
    """An inline task that already knows its answer: it completes in its on_enter."""

    def __init__(self, journal: Journal, n: int) -> None:
        super().__init__(journal, name=f"lookup {n}", instructions=f"You look up record {n}.")
        self.n = n

    async def on_enter(self) -> None:
        await super().on_enter()
        self.complete(f"record {self.n}")


class Desk(JournalingAgent):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.lookups = 0

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        self.lookups += 1
        result = await LookupTask(self.journal, self.lookups)
        self.journal.results.append(result)
        return result


def answer_with_output(gen: RTGeneration) -> str:
    last = gen.chat_ctx.items[-1]
    assert last.type == "function_call_output", f"unexpected generation after {last.type}"
    return f"found {last.output}"


@BUG
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_two_consecutive_tasks_each_answered_before_run_returns(
    make_session: MakeSession, reuse: bool
) -> None:
    model = ScriptedRealtimeModel(
        [
            Reply(tool_calls=[tool_call("look_up")]),
            answer_with_output,
            Reply(tool_calls=[tool_call("look_up")]),
            answer_with_output,
        ],
        reuse=reuse,
    )
    journal = Journal()
    desk = Desk(journal)
    session = await make_session(desk, llm=model)

    for n in (1, 2):
        await bounded(session.run(user_input=f"look up record {n}"), RUN_BOUND, what=f"session.run() #{n}")
        # the run returns once the desk got the task's result and answered it
        assert journal.results == [f"record {i}" for i in range(1, n + 1)]
        assert spoken(session)[-1] == f"found record {n}"
        assert session.current_agent is desk
        # what a client does before the next user turn
        assert await bounded(session.wait_for_idle(), what="wait_for_idle()") is desk._activity

    assert journal.events == [
        "enter desk",
        "enter lookup 1",
        "exit lookup 1",
        "enter lookup 2",
        "exit lookup 2",
    ]
    # every generation was the desk's: the lookups answer nothing themselves
    assert [g.instructions for g in model.generations] == [DESK] * 4
    await bounded(session.aclose(), what="AgentSession.aclose")
    assert journal.events[-1] == "exit desk"
