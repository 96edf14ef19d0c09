"""Nova Sonic: a tool that awaits an ``AgentTask`` gets its result to the model.

A tool that awaits an inline ``AgentTask`` pauses its agent, whose Nova Sonic stream is
closed; when the task completes, the agent resumes on a new stream. That stream never issued
the call, so a ``toolResult`` cannot answer it: the result must reach the model as interactive
text marked as a tool result, which the model answers. Before the fix the result was dropped
and the model never answered it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, function_tool

if sys.version_info < (3, 12):
    pytest.skip("the Nova Sonic realtime model needs Python 3.12+", allow_module_level=True)

from livekit.plugins.aws.experimental.realtime import (  # noqa: E402
    RealtimeModel,
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
)

QUESTION = "look up my record"
ANSWER = "Your record is number 7."


class LookupTask(AgentTask[str]):
    """Already knows its answer: completes in its on_enter."""

    def __init__(self) -> None:
        super().__init__(instructions="You look up records.")

    async def on_enter(self) -> None:
        self.complete("record 7")


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a desk.", llm=RealtimeModel.with_nova_sonic_2())

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        return f"found {await LookupTask()}"


async def test_task_result_reaches_the_resumed_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer(QUESTION, model_turn(tool=("tool-1", "look_up", {})))
    bedrock.answer("found record 7", model_turn(ANSWER))
    given = asyncio.Event()
    update_chat_ctx = RealtimeSession.update_chat_ctx

    async def _update_chat_ctx(self: RealtimeSession, chat_ctx: Any) -> None:
        await update_chat_ctx(self, chat_ctx)
        if any(i.type == "function_call_output" for i in chat_ctx.items):
            given.set()  # the framework gave a session the call's output

    monkeypatch.setattr(RealtimeSession, "update_chat_ctx", _update_chat_ctx)
    session = AgentSession(vad=None, turn_handling={"turn_detection": None}, user_away_timeout=None)
    async with session:
        answered = asyncio.Event()
        session.on(
            "conversation_item_added",
            lambda ev: (
                ev.item.type == "message" and ev.item.text_content == ANSWER and answered.set()
            ),
        )
        await session.start(Desk())
        await bedrock.stream(0)
        # (the framework waits 5 s for the model's reply to the result before it gives up)
        await asyncio.wait_for(session.run(user_input=QUESTION), TIMEOUT)
        await asyncio.wait_for(given.wait(), TIMEOUT)
        resumed = await bedrock.stream(1)
        await asyncio.wait_for(session.wait_for_idle(), TIMEOUT)

        results = [t for _, interactive, t in resumed.texts() if interactive and "found" in t]
        assert len(results) == 1, f"the task's result never reached the model: {resumed.texts()}"
        assert "tool result" in results[0] and results[0].endswith("found record 7")
        await asyncio.wait_for(answered.wait(), TIMEOUT)  # and the model answered it
        # no toolResult on either stream: the first closed with the call open, the new one
        # never issued it
        assert bedrock.streams[0].tool_results() == [] and resumed.tool_results() == []
