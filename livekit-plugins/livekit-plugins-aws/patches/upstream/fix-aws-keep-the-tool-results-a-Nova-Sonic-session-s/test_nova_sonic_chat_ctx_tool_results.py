"""Nova Sonic: the session's ``chat_ctx`` holds the tool results it sent.

The framework waits for the automatic reply to tool outputs only when the realtime session's
``chat_ctx`` does not hold them yet. ``RealtimeSession.chat_ctx`` holds the user text the session
sent; it must hold the tool results it sent too, or every output looks new to the framework, and
a turn whose results the model answered quickly waits 5 s for a reply that was already spoken.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from livekit.agents import Agent, function_tool

if sys.version_info < (3, 12):
    pytest.skip("the Nova Sonic realtime model needs Python 3.12+", allow_module_level=True)


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

QUESTION = "is table 12 free?"


class Host(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You check tables.")

    @function_tool
    async def check_table(self, table: int) -> str:
        """Check a table."""
        return "free from 8pm"


async def test_chat_ctx_holds_the_sent_tool_result(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer(QUESTION, model_turn(tool=("call-7", "check_table", {"table": 12})))
    bedrock.answer("free from 8pm", model_turn("Table 12 is free from 8pm."))
    async with offline_session() as session:
        await session.start(Host())
        stream = await bedrock.stream(0)
        await asyncio.wait_for(session.run(user_input=QUESTION), TIMEOUT)
        await bedrock.wait_for(stream.tool_results, "the toolResult of call-7")
        await bedrock.flush_audio_input()  # the task that sent it has moved on
        assert [tool_id for tool_id, _ in stream.tool_results()] == ["call-7"]

        rt = bedrock.sessions[0]
        user = [
            i.text_content for i in rt.chat_ctx.items if i.type == "message" and i.role == "user"
        ]
        assert user == [QUESTION]
        outputs = [i.call_id for i in rt.chat_ctx.items if i.type == "function_call_output"]
        assert outputs == ["call-7"], f"the session's chat_ctx misses the result it sent: {outputs}"
