"""Nova Sonic: tools given to an agent that started without any reach the model.

Nova Sonic takes the tool list only in a stream's ``promptStart``, so ``RealtimeSession``
recycles its stream when the tools change. Before it starts a stream it waits up to 500 ms for
its first tool list, instructions and chat context, but stock 1.8.9's ``update_tools()`` only
counted a non-empty list as the first one: an agent without tools always waited the whole
500 ms before its stream started, and the first tools it was given later were taken for that
first list. They were kept locally and never reached the model: no recycle, and the model
cannot call them. Now any first list, empty or not, ends the wait, and later changes recycle.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import json

import pytest
from livekit.agents import Agent, function_tool

from tests.fakes import MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    event_kind,
    is_interactive_text,
    model_turn,
    sent_texts,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [*NOVA_SONIC_MARKS]


@function_tool
async def cancel_booking(table: int) -> str:
    """Cancel a booking."""
    return f"table {table} cancelled"


class Host(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())


@pytest.mark.upstream_bug(
    "not-yet: the turn right after tools are given to a Nova Sonic agent that had none goes to "
    "a stream that does not declare them"
)
async def test_tools_added_to_an_agent_without_tools(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    agent = Host()
    session, _ = await nova_session(bedrock, make_session, agent)

    await agent.update_tools([cancel_booking])
    await bounded(session.run(user_input="hi"))

    latest = bedrock.connections[-1]
    prompt = next(e for e in latest.sent if event_kind(e) == "promptStart")
    declared = json.dumps(prompt["event"]["promptStart"].get("toolConfiguration", {}))
    assert "cancel_booking" in declared, "the turn went to a stream without the tool the agent was given"
    assert ("USER", True, "hi") in sent_texts(latest.sent)
    assert bedrock.violations == []
