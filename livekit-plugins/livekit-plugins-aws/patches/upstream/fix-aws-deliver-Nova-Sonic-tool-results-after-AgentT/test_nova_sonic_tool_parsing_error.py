"""Nova Sonic: a tool result Bedrock cannot parse does not drop the other calls' results.

Bedrock reports a ``toolResult`` it cannot parse as a ``ValidationException`` ("Tool Response
parsing error") and the stream goes on. The session must still answer every other call of the
stream whose tool is still running: its result goes out as the ``toolResult`` for its call.
Before the fix the error cleared the calls still waiting for a result, so such a result was
skipped without a log and the model never answered it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from livekit.agents import Agent, function_tool

if sys.version_info < (3, 12):
    pytest.skip("the Nova Sonic realtime model needs Python 3.12+", allow_module_level=True)

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

PARSING_ERROR = "Tool Response parsing error"


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book tables.")
        self.running = asyncio.Event()
        self.release = asyncio.Event()

    @function_tool
    async def book(self, table: int) -> str:
        """Book a table."""
        self.running.set()
        await self.release.wait()
        return f"table {table} booked"


async def test_parsing_error_keeps_the_calls_still_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aws_sdk_bedrock_runtime.models import ValidationException

    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer("book table 12", model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.answer("table 12 booked", model_turn("Your table is booked."))
    agent = Booker()
    output_given = asyncio.Event()
    update_chat_ctx = RealtimeSession.update_chat_ctx

    async def _update_chat_ctx(self: RealtimeSession, chat_ctx: Any) -> None:
        await update_chat_ctx(self, chat_ctx)
        if any(i.type == "function_call_output" for i in chat_ctx.items):
            output_given.set()  # the framework gave the session the call's output

    monkeypatch.setattr(RealtimeSession, "update_chat_ctx", _update_chat_ctx)
    async with offline_session() as session:
        reported: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def _on_error(ev: Any) -> None:
            if PARSING_ERROR in str(ev.error) and not reported.done():
                reported.set_result(None)

        session.on("error", _on_error)
        await session.start(agent)
        stream = await bedrock.stream(0)
        run = asyncio.ensure_future(session.run(user_input="book table 12"))
        await asyncio.wait_for(agent.running.wait(), TIMEOUT)
        # a result sent earlier (another call's) failed to parse; the stream goes on
        stream.fail(ValidationException(message=f"{PARSING_ERROR}: Expecting value: line 1"))
        await asyncio.wait_for(reported, TIMEOUT)
        agent.release.set()
        await asyncio.wait_for(run, TIMEOUT)
        await asyncio.wait_for(output_given.wait(), TIMEOUT)
        await bedrock.flush_audio_input()  # the result, if queued, went out

        assert [tool_id for tool_id, _ in stream.tool_results()] == ["tool-1"], (
            "the result of a call still running during a tool parsing error was not sent"
        )
