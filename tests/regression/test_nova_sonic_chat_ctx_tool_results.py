"""Nova Sonic: the realtime session's ``chat_ctx`` holds the tool results it sent.

The framework waits for a realtime model's automatic reply to tool outputs only when the
session's ``chat_ctx`` does not hold them yet (the model answers new results only). Stock
1.8.9's ``RealtimeSession.update_chat_ctx()`` sends the results (as ``toolResult``, or as text)
without adding them to the context ``chat_ctx`` returns, so every output looks new: when the
model answered before the framework started waiting (two calls in one completion, an async
tool's final result sent first), the run sits out the framework's five-second wait for a reply
that was already spoken. Each result is now in ``chat_ctx`` once it went out.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import pytest
from livekit.agents import Agent, function_tool

from tests.fakes import MakeSession, bounded
from tests.fakes.bedrock_stream import FakeBedrock, is_interactive_text, is_tool_result, model_turn
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: a Nova Sonic session's chat_ctx never holds the tool results it sent"),
]

QUESTION = "is table 12 free?"


class Host(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())

    @function_tool
    async def check_table(self, table: int) -> str:
        """Check a table."""
        return "free from 8pm"


async def test_chat_ctx_holds_the_sent_tool_result(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    bedrock.reply_when(
        is_interactive_text(QUESTION), model_turn(tool=("call-7", "check_table", {"table": 12}))
    )
    bedrock.reply_when(is_tool_result("call-7"), model_turn("Table 12 is free from 8pm.", audio=False))
    session, conn = await nova_session(bedrock, make_session, Host())

    await bounded(session.run(user_input=QUESTION), what="the run of the question")
    await conn.wait_sent(is_tool_result("call-7"), what="the toolResult of call-7")

    rt = bedrock.sessions[0]
    outputs = [item.call_id for item in rt.chat_ctx.items if item.type == "function_call_output"]
    assert outputs == ["call-7"], f"the session's chat_ctx misses the result it sent: {outputs}"
