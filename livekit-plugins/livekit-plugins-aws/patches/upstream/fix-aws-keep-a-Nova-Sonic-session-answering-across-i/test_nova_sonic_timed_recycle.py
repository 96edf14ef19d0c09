"""Nova Sonic: the timed session recycle completes, and the conversation goes on.

``RealtimeSession`` recycles its Bedrock stream on a timer, before the 8-minute stream limit or
its credentials' expiry. The recycle must complete: the old stream ended the way the protocol
asks (audio ``contentEnd``, ``promptEnd``, ``sessionEnd``) and closed, and the next turn answered
on the new stream. Before the fix the recycle, which restarts the timer, cancelled its own task
while it sent the new stream's history: the new stream never got its reader or audio input, and
the session went silent.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from livekit.agents import Agent

if sys.version_info < (3, 12):
    pytest.skip("the Nova Sonic realtime model needs Python 3.12+", allow_module_level=True)

from livekit.plugins.aws.experimental.realtime import (  # noqa: E402
    realtime_model,
)
from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession  # noqa: E402

pytestmark = [
    pytest.mark.unit,
    pytest.mark.no_concurrent,  # patches the plugin's module and class for the whole process
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]

from .fake_nova_sonic import (  # noqa: E402
    TIMEOUT,
    FakeBedrock,
    model_turn,
    offline_session,
)


class Host(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a host.")


def next_recycle(monkeypatch: pytest.MonkeyPatch) -> asyncio.Future[str]:
    """How the next ``_graceful_session_recycle()`` ends: "done", "cancelled" or the error."""
    outcome: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    recycle = RealtimeSession._graceful_session_recycle

    async def _watched(self: RealtimeSession) -> None:
        try:
            await recycle(self)
        except asyncio.CancelledError:
            outcome.done() or outcome.set_result("cancelled")
            raise
        except Exception as e:
            outcome.done() or outcome.set_result(repr(e))
            raise
        outcome.done() or outcome.set_result("done")

    monkeypatch.setattr(RealtimeSession, "_graceful_session_recycle", _watched)
    return outcome


async def test_timed_recycle_keeps_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer("hi", model_turn("Hello there."))
    bedrock.answer("still there?", model_turn("Yes, still here."))
    before = asyncio.all_tasks()
    try:
        await _converse_across_the_recycle(bedrock, monkeypatch)
    finally:
        # before the fix the broken recycle left its timer running past the session's close
        left = [
            t
            for t in asyncio.all_tasks() - before
            if t.get_name() == "RealtimeSession._session_recycle_timer"
        ]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)


async def _converse_across_the_recycle(
    bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with offline_session() as session:
        await session.start(Host())
        old = await bedrock.stream(0)
        await asyncio.wait_for(session.run(user_input="hi"), TIMEOUT)

        # the recycle timer fires now, as it does at the end of its period
        outcome = next_recycle(monkeypatch)
        # (a timer started later, for the new stream, keeps the plugin's period)
        period = realtime_model.MAX_SESSION_DURATION_SECONDS
        monkeypatch.setattr(realtime_model, "MAX_SESSION_DURATION_SECONDS", 0)
        bedrock.sessions[0]._start_session_recycle_timer()
        monkeypatch.setattr(realtime_model, "MAX_SESSION_DURATION_SECONDS", period)
        result = await asyncio.wait_for(outcome, TIMEOUT)
        assert result == "done", f"the timed recycle did not complete: {result}"

        new = await bedrock.stream(1)
        # the old stream was ended the way the protocol asks, then closed
        assert old.kinds()[-3:] == ["contentEnd", "promptEnd", "sessionEnd"], old.kinds()[-3:]
        assert old.input_stream.closed
        # the conversation goes on on the new stream
        run = await asyncio.wait_for(session.run(user_input="still there?"), TIMEOUT)
        assert ("USER", True, "still there?") in new.texts()
        assert [e.item.text_content for e in run.events if e.type == "message"] == [
            "Yes, still here."
        ]
        assert len(bedrock.streams) == 2
