"""A tool that ends the call with ``await session.aclose()`` hangs the session.

The close interrupts the tool's speech and waits for it (``AgentActivity.interrupt()``,
``drain()``, then ``current_speech`` in ``AgentSession._teardown_activity()``), and the speech
waits for its tool, which waits for the close. On 1.8.9 the close never completes, and tearing
the event loop down recurses until ``RecursionError`` in ``_GatheringFuture.cancel``. 0012
(a tool closing its own activity does not wait for itself) leaves out the current task and
its speech in ``AgentActivity.aclose()`` and the tool executor, but not in the session's
teardown: the close still waits for the tool's speech, which is cancelled only by the speech
handle's interruption timeout, and ``aclose()`` does not return in time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession, CloseEvent, RunContext, function_tool

from tests import fakes
from tests.fakes import (
    BoundedWaitTimeout,
    JournalingAgent,
    MakeSession,
    Reply,
    bounded,
    scripted_model,
    tool_call,
)


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal) -> None:
        super().__init__(journal, name="desk", instructions="You are the desk.")

    @function_tool
    async def end_call(self, ctx: RunContext) -> str:
        """End the call."""
        await ctx.session.aclose()
        self.journal.events.append("closed")
        return "bye"


@pytest.mark.upstream_bug(
    "not-yet: a tool awaiting session.aclose() hangs the session",
    raises=BoundedWaitTimeout,
    match="session close",
)
@pytest.mark.xfail(strict=True, reason="the session teardown waits for the closing tool's own speech")
@pytest.mark.parametrize("kind", ["pipeline", "realtime-reused"])
async def test_a_tool_awaiting_aclose(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    model = scripted_model(kind, [Reply(tool_calls=[tool_call("end_call")])], fallback="Goodbye.")
    session: AgentSession[Any] = await make_session(Desk(journal), llm=model)
    closed: asyncio.Future[CloseEvent] = asyncio.get_running_loop().create_future()
    session.on("close", lambda ev: closed.done() or closed.set_result(ev))

    session.generate_reply(user_input="That's all, thanks.")
    await bounded(closed, what="session close")

    assert journal.events.count("exit desk") == 1, journal.events
    await bounded(session.aclose(), what="AgentSession.aclose")
    assert journal.events[-1] == "closed", journal.events
