"""livekit/agents#4115 (closest related): a realtime model answers in two generations, the
first with a call to a plain tool, the second with a call to a tool that awaits an inline
``AgentTask`` (Nova Sonic makes each toolUse of a completion a generation of its own).

The first speech's realtime tool reply waits for every other speech of the activity to end
before it sends its output ("most realtime models don't support generating multiple
responses at the same time"): the second speech, whose tool awaits the task. That tool's task
pauses the activity, and pausing waits for the first speech to end. Stock 1.8.9 waits there
for good: ``run()`` never returns, the task never starts, neither output reaches the model and
``aclose()`` hangs (the stress harness's Nova mode, seed 119). The fork's reply stops waiting
for a speech whose tool awaits an inline task: that speech ends only after the pause.
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import FunctionToolsExecutedEvent, function_tool

from tests.fakes import (
    BoundedWaitTimeout,
    FakeAudioOutput,
    Journal,
    JournalingAgent,
    JournalingTask,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
    tool_call,
)

BUG = pytest.mark.upstream_bug(
    "livekit/agents#4115", raises=BoundedWaitTimeout, match=r"for session\.run\(\)$"
)

DESK = "You are the front desk."
RUN_BOUND = 2.5
# what the second generation says while its call runs: still playing (at FakeAudioOutput's
# loop-clock pace) when the first tool returns
SAYING = "Let me look that up for you, it takes a moment."


class LookupTask(JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="lookup", instructions="You look up a record.")

    async def on_enter(self) -> None:
        await super().on_enter()
        self.complete("record 1")


class Desk(JournalingAgent):
    def __init__(self, journal: Journal, model: ScriptedRealtimeModel) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.model = model
        self.look_up_started = asyncio.Event()

    @function_tool
    async def note(self) -> str:
        """Take a note."""
        # the model goes on with a second generation, calling look_up, while this runs
        self.model.live_sessions[-1].emit_generation(
            Reply(text=SAYING, tool_calls=[tool_call("look_up", call_id="look")])
        )
        await bounded(self.look_up_started.wait(), what="look_up to start")
        return "noted"

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        self.look_up_started.set()
        result = await LookupTask(self.journal)
        self.journal.results.append(result)
        return result


def speaking(gen: RTGeneration) -> str:
    return f"{gen.instructions} speaking"


@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
@BUG
async def test_the_run_returns_with_both_outputs(make_session: MakeSession, reuse: bool) -> None:
    model = ScriptedRealtimeModel(
        [Reply(tool_calls=[tool_call("note", call_id="note")])],
        fallback=speaking,
        reuse=reuse,
        audio_output=True,
    )
    journal = Journal()
    desk = Desk(journal, model)
    session = await make_session(desk, llm=model, audio_output=FakeAudioOutput(mode="realtime"))
    looked_up = asyncio.Event()

    def on_executed(ev: FunctionToolsExecutedEvent) -> None:
        if any(out.call_id == "look" for out in ev.function_call_outputs if out is not None):
            looked_up.set()

    session.on("function_tools_executed", on_executed)

    await bounded(session.run(user_input="note it and look me up"), RUN_BOUND, what="session.run()")
    # the second generation came from the model on its own: the run need not wait for it
    await bounded(looked_up.wait(), RUN_BOUND, what="look_up's output")
    await bounded(session.wait_for_idle(), RUN_BOUND, what="wait_for_idle()")

    outputs = {
        item.call_id: item.output for item in session.history.items if item.type == "function_call_output"
    }
    assert outputs == {"note": "noted", "look": "record 1"}
    assert journal.results == ["record 1"]
    assert journal.events == ["enter desk", "enter lookup", "exit lookup"]
    assert session.current_agent is desk
    # both outputs reached the desk's model
    sent = {
        item.call_id
        for sess in model.sessions
        for item in sess.chat_ctx.items
        if item.type == "function_call_output"
    }
    assert {"note", "look"} <= sent
    await bounded(session.aclose(), what="AgentSession.aclose")
