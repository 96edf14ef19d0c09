"""A tool that ends the call with ``await session.aclose()`` hangs the session.

The close interrupts the tool's speech and waits for it (``AgentActivity.interrupt()``,
``drain()``, then ``current_speech`` in ``AgentSession._teardown_activity()``), and the speech
waits for its tool, which waits for the close. On 1.8.9 the close never completes, and tearing
the event loop down recurses until ``RecursionError`` in ``_GatheringFuture.cancel``. The same
holds for an agent's ``on_enter()`` that awaits ``aclose()``: the drain waits for on_enter's
task. 0012 leaves the caller's task and its speech out of the session's teardown too: the
close interrupts the speech, as ``shutdown(drain=False)`` does, and returns at once; the agent
exits once, and the tool's result is recorded when the tool returns (no goodbye is spoken:
``aclose()`` does not drain, see the parity guard of ``shutdown()`` from a tool). An agent whose
``on_exit()`` awaits ``aclose()`` hangs as well (on_exit runs inside the drain, under the lock the
close needs): its ``aclose()`` now starts the close and returns.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from livekit.agents import AgentSession, CloseEvent, RunContext, function_tool
from livekit.agents.voice import SpeechHandle

from tests import fakes
from tests.fakes import MODEL_KINDS, JournalingAgent, MakeSession, Reply, bounded, scripted_model, tool_call
from tests.fakes.bedrock_stream import FakeBedrock, is_interactive_text, is_tool_result, model_turn

# a close that waits for nothing but fakes takes milliseconds; a close waiting for its caller's
# speech ends (on the fork before this fix) only with the speech's 5 s interruption timeout
CLOSE_BOUND = 2.0


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, where: str, **kwargs: Any) -> None:
        super().__init__(journal, name="desk", instructions="You are the desk.", **kwargs)
        self.where = where
        self.returned = asyncio.Event()  # aclose() returned to the caller

    async def on_enter(self) -> None:
        await super().on_enter()
        if self.where == "on_enter":
            await self.session.aclose()
            self.journal.events.append("closed")
            self.returned.set()

    async def on_exit(self) -> None:
        await super().on_exit()
        if self.where == "on_exit":
            await self.session.aclose()
            self.journal.events.append("closed")
            self.returned.set()

    @function_tool
    async def end_call(self, ctx: RunContext) -> str:
        """End the call."""
        if self.where == "foreground":
            async with ctx.foreground():
                await ctx.session.aclose()
        else:
            await ctx.session.aclose()
        self.journal.events.append("closed")
        self.returned.set()
        return "bye"


async def _closed_in_time(closed: asyncio.Future[CloseEvent]) -> bool:
    """Whether the session closed within CLOSE_BOUND. Where it did not, the closing task waits
    for itself: cancel it, so the failure reported is the assertion, not the leftover tasks."""
    await asyncio.wait({closed}, timeout=CLOSE_BOUND)
    if closed.done():
        return True
    for task in asyncio.all_tasks():
        if task.get_name() in ("tool_exec_end_call", "AgentTask_on_enter", "AgentTask_on_exit"):
            task.cancel()
    return False


@pytest.mark.upstream_bug("not-yet: a tool awaiting session.aclose() hangs the session")
@pytest.mark.parametrize("where", ["tool", "foreground"])
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_a_tool_awaiting_aclose(make_session: MakeSession, kind: str, where: str) -> None:
    journal = fakes.Journal()
    model = scripted_model(kind, [Reply(tool_calls=[tool_call("end_call")])], fallback="Goodbye.")
    desk = Desk(journal, where)
    session: AgentSession[Any] = await make_session(desk, llm=model)
    closed: asyncio.Future[CloseEvent] = asyncio.get_running_loop().create_future()
    session.on("close", lambda ev: closed.done() or closed.set_result(ev))
    speeches: list[SpeechHandle] = []
    session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))

    session.generate_reply(user_input="That's all, thanks.")
    assert await _closed_in_time(closed), "the session never closed: the close waits for its own tool"

    assert closed.result().error is None
    # the close returned to the tool, which then ends its speech with its result
    await bounded(desk.returned.wait(), what="aclose() to return to the tool")
    await bounded(asyncio.gather(*(s.wait_for_playout() for s in speeches)), what="the tool's speech")
    assert journal.events == ["enter desk", "exit desk", "closed"], journal.events
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [(o.name, o.output) for o in outputs] == [("end_call", "bye")]
    # aclose() interrupts as shutdown(drain=False) does: no reply to the result
    assert fakes.spoken(session) == []
    assert fakes.late_calls(model) == []
    await bounded(session.aclose(), what="AgentSession.aclose")


@pytest.mark.upstream_bug("not-yet: an on_enter() awaiting session.aclose() hangs the session")
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_on_enter_awaiting_aclose(kind: str) -> None:
    journal = fakes.Journal()
    model = scripted_model(kind, [], fallback="Hello.")
    session: AgentSession[Any] = AgentSession(**fakes.offline_session_kwargs(llm=model))
    closed: asyncio.Future[CloseEvent] = asyncio.get_running_loop().create_future()
    session.on("close", lambda ev: closed.done() or closed.set_result(ev))

    try:
        desk = Desk(journal, "on_enter")
        await bounded(session.start(desk, record=False), what="AgentSession.start")
        assert await _closed_in_time(closed), "the session never closed: the close waits for on_enter"

        assert journal.events[:2] == ["enter desk", "exit desk"], journal.events
        await bounded(desk.returned.wait(), what="aclose() to return to on_enter")
        assert journal.events == ["enter desk", "exit desk", "closed"], journal.events
        assert fakes.spoken(session) == []
    finally:
        await bounded(session.aclose(), what="AgentSession.aclose")


@pytest.mark.upstream_bug("not-yet: an on_exit() awaiting session.aclose() hangs the session")
@pytest.mark.parametrize("exit_by", ["update_agent", "aclose", "shutdown"])
async def test_on_exit_awaiting_aclose(make_session: MakeSession, exit_by: str) -> None:
    """on_exit() runs inside the drain of a handoff or of the close itself, which waits for it:
    its aclose() starts the close (or leaves the one under way) and returns."""
    journal = fakes.Journal()
    model = scripted_model("pipeline", [], fallback="Hello.")
    desk = Desk(journal, "on_exit")
    session: AgentSession[Any] = await make_session(desk, llm=model)
    closed: asyncio.Future[CloseEvent] = asyncio.get_running_loop().create_future()
    session.on("close", lambda ev: closed.done() or closed.set_result(ev))

    closing: asyncio.Future[None] | None = None
    if exit_by == "update_agent":
        session.update_agent(JournalingAgent(journal, name="other", instructions="You are the other desk."))
    elif exit_by == "aclose":
        closing = asyncio.ensure_future(session.aclose())
    else:
        session.shutdown()
    assert await _closed_in_time(closed), "the session never closed: the close waits for on_exit"

    await bounded(desk.returned.wait(), what="aclose() to return to on_exit")
    if closing is not None:
        await bounded(closing, what="the application's aclose()")
    # the session closed before the agent taking over started
    assert journal.events == ["enter desk", "exit desk", "closed"], journal.events


@pytest.mark.upstream_bug("not-yet: a tool awaiting session.aclose() hangs the session")
@pytest.mark.skipif(sys.version_info < (3, 12), reason="the Nova Sonic extra needs Python 3.12+")
@pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning")
async def test_a_nova_sonic_tool_awaiting_aclose(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    bedrock.reply_when(is_interactive_text("That's all."), model_turn(tool=("tool-1", "end_call", {})))
    bedrock.reply_when(is_tool_result("tool-1"), model_turn("Goodbye."))
    journal = fakes.Journal()
    desk = Desk(journal, "tool", llm=RealtimeModel.with_nova_sonic_2())
    session: AgentSession[Any] = await make_session(desk)
    await (await bedrock.connection(0)).wait_ready()
    closed: asyncio.Future[CloseEvent] = asyncio.get_running_loop().create_future()
    session.on("close", lambda ev: closed.done() or closed.set_result(ev))
    speeches: list[SpeechHandle] = []
    session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))

    session.generate_reply(user_input="That's all.")
    assert await _closed_in_time(closed), "the session never closed: the close waits for its own tool"

    await bounded(desk.returned.wait(), what="aclose() to return to the tool")
    await bounded(asyncio.gather(*(s.wait_for_playout() for s in speeches)), what="the tool's speech")
    assert journal.events == ["enter desk", "exit desk", "closed"], journal.events
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [(o.name, o.output) for o in outputs] == [("end_call", "bye")]
    assert fakes.spoken(session) == []
    assert bedrock.violations == []
