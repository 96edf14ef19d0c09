"""A realtime tool reply does not wait for a speech whose tool awaits an inline AgentTask."""

from __future__ import annotations

import asyncio

import pytest

from livekit.agents import (
    Agent,
    AgentSession,
    AgentTask,
    FunctionToolsExecutedEvent,
    function_tool,
    utils,
)
from livekit.agents.llm import FunctionCall

from .fake_answering_realtime import AnsweringModel, generation

pytestmark = pytest.mark.unit


class LookupTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="You look up a record.")

    async def on_enter(self) -> None:
        self.complete("record 1")


class Desk(Agent):
    def __init__(self, model: AnsweringModel) -> None:
        super().__init__(instructions="You are the front desk.")
        self.model = model
        self.look_up_started = asyncio.Event()
        self.results: list[str] = []
        # what the second generation says: still being said when note returns
        self.saying = utils.aio.Chan[str]()

    @function_tool
    async def note(self) -> str:
        """Take a note."""
        # the model goes on with a generation of its own while this tool runs, saying
        # something and calling look_up (Nova Sonic makes each tool call of a response a
        # generation of its own)
        self.saying.send_nowait("Let me look that up for you.")
        self.model.active_session.emit(
            "generation_created",
            generation(
                [FunctionCall(call_id="look", name="look_up", arguments="{}")],
                user_initiated=False,
                saying=self.saying,
            ),
        )
        await asyncio.wait_for(self.look_up_started.wait(), timeout=5)
        return "noted"

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        self.look_up_started.set()
        result = await LookupTask()
        self.results.append(result)
        return result


async def test_reply_to_a_tool_does_not_wait_for_a_speech_paused_by_an_inline_task() -> None:
    model = AnsweringModel(
        [[FunctionCall(call_id="note", name="note", arguments="{}")]],
        # the framework asks for each tool reply itself
        auto_tool_reply_generation=False,
    )
    desk = Desk(model)
    session = AgentSession(llm=model)
    looked_up = asyncio.Event()

    @session.on("function_tools_executed")
    def _on_executed(ev: FunctionToolsExecutedEvent) -> None:
        call_ids = {out.call_id for out in ev.function_call_outputs if out is not None}
        if "note" in call_ids:
            # the second generation ends only once note's output is in
            desk.saying.close()
        if "look" in call_ids:
            looked_up.set()

    await session.start(desk)
    try:
        run_task = asyncio.ensure_future(session.run(user_input="Note it and look me up."))
        await asyncio.wait({run_task}, timeout=5)
        returned = run_task.done()
        if not returned:
            _release_deadlock()
        await asyncio.wait_for(run_task, timeout=5)
        assert returned, "session.run() never returned: the tool reply waits for the paused speech"

        # the second generation came from the model on its own: the run need not wait for it
        await asyncio.wait_for(looked_up.wait(), timeout=5)
        await asyncio.wait_for(session.wait_for_idle(), timeout=5)
        outputs = {
            item.call_id: item.output
            for item in session.history.items
            if item.type == "function_call_output"
        }
        assert outputs == {"note": "noted", "look": "record 1"}
        assert desk.results == ["record 1"]
        assert session.current_agent is desk
    finally:
        await asyncio.wait_for(session.aclose(), timeout=5)


def _release_deadlock() -> None:
    """Where this fails, note's reply waits for look_up's speech, whose task waits for the
    pause, which waits for note's speech: cancel look_up, so that the session can close and
    the failure reported is the assertion, not the leftover tasks."""
    for task in asyncio.all_tasks():
        if task.get_name() == "tool_exec_look_up":
            task.cancel()
