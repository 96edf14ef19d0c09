"""Nova Sonic: a new stream gets the tool results of the context it starts with.

An agent that takes over with the conversation so far (a handoff that carries the chat context
on, an agent resumed after an inline task) opens a new Nova Sonic stream. A toolUse exists only
on the stream that issued it, so the results in that context can only reach the model as text:
stock 1.8.9's prompt-start history (``SonicEventBuilder.create_prompt_start_block()``) holds the
messages only, and the model of the new stream never learns what the tools returned; a result
that landed in the context while no stream was open (an async tool's final result during a
handoff) reaches no model at all, and the framework's follow-up prompt then names a call id the
model never saw. The history now holds each result as USER text marked as a tool result.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import pytest
from livekit.agents import Agent, function_tool, llm

from tests.fakes import MakeSession
from tests.fakes.bedrock_stream import FakeBedrock, sent_texts
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: a new Nova Sonic stream never gets the tool results of its context"),
]

MARK = "This is a tool result, not the user speaking."


class Taker(Agent):
    def __init__(self, chat_ctx: llm.ChatContext) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2(), chat_ctx=chat_ctx)

    @function_tool
    async def check_table(self, table: int) -> str:
        """Check a table (the framework keeps the calls of the agent's own tools in its context)."""
        return "free from 8pm"


async def test_the_history_holds_the_context_s_tool_results(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="is table 12 free tonight?")
    ctx.items.append(llm.FunctionCall(call_id="call-7", name="check_table", arguments='{"table": 12}'))
    ctx.items.append(
        llm.FunctionCallOutput(call_id="call-7", name="check_table", output="free from 8pm", is_error=False)
    )
    _, conn = await nova_session(bedrock, make_session, Taker(ctx))

    history = [(role, text) for role, interactive, text in sent_texts(conn.sent) if not interactive]
    results = [text for role, text in history if "(call id call-7)" in text]
    assert results, f"the tool result is not in the stream's history: {history}"
    assert all(MARK in text and "free from 8pm" in text for text in results)
    assert [role for role, text in history if "(call id call-7)" in text] == ["USER"]
