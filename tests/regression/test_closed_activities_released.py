"""A long session keeps every agent activity it ever closed alive.

No upstream issue reports this yet. A support line that hands a caller between two agents
(A -> B -> A ...) closes one ``AgentActivity`` per handoff, and on stock 1.8.9 none of them is
ever freed: with its tasks, tool executor and model streams, each handoff costs memory for as
long as the session lasts. Two chains keep them:

* every activity's scheduling task is created in the context of the tool that handed off to it,
  whose activity context variable names the previous activity, whose scheduling task names the
  one before it, and so on back to the first;
* the session records every speech it creates (``SpeechCreatedEvent``), and a speech keeps its
  finished tasks, and the run watching it keeps its finished tasks, each with its context and
  the activity in it.

The fork lets the finished tasks go and runs the scheduling task in its own activity's context,
so only the activity before the current one can stay (the current one's tasks were started from
its tool). ``benchmarks/long_run.py`` measures the same over 1,000 handoffs.
"""

from __future__ import annotations

import gc
import weakref

import pytest
from livekit.agents import Agent, AgentSession, function_tool

from tests.fakes import MakeSession, Reply, ScriptedLLM, bounded, tool_call

BUG = pytest.mark.upstream_bug("not-yet: closed activities stay reachable for the whole session")

HANDOFFS = 12


class Desk(Agent):
    def __init__(self, name: str) -> None:
        super().__init__(instructions=f"You are desk {name}.")
        self.name = name

    @function_tool
    async def switch(self) -> Agent:
        """Send the caller to the other desk."""
        return Desk("B" if self.name == "A" else "A")


def _activity(session: AgentSession) -> weakref.ref[object]:
    activity = session._activity
    assert activity is not None
    return weakref.ref(activity)


@BUG
async def test_activities_closed_by_handoffs_are_freed(make_session: MakeSession) -> None:
    fake = ScriptedLLM(fallback=lambda call: Reply(tool_calls=[tool_call("switch")]))
    session = await make_session(Desk("A"), llm=fake)
    activities = [_activity(session)]

    for _ in range(HANDOFFS):
        await bounded(session.run(user_input="next desk, please"))
        activities.append(_activity(session))

    # every run handed off, to a new activity each time
    handoffs = [item for item in session.history.items if item.type == "agent_handoff"]
    assert len(handoffs) == HANDOFFS + 1  # the first one is the session's start
    assert [c.agent.name for c in fake.calls[:4]] == ["A", "B", "A", "B"]

    gc.collect()
    alive = [i for i, ref in enumerate(activities[:-2]) if ref() is not None]
    assert alive == [], f"{len(alive)} of {HANDOFFS - 1} closed activities are still reachable"
