"""Guards for Nova Sonic 2 (``modalities="mixed"``) driven by a real ``AgentSession``: a typed
turn is sent as interactive text and the model's answer lands in the history; a tool call is
run and answered with a ``toolResult`` for the id the connection issued, and the model's answer
to it lands too. Both hold on stock 1.8.9 and on the fork.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock bidirectional stream under
the plugin's own session, so the assertions are on the events that would go on the wire."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool, llm

from tests.fakes import MakeSession, bounded, wait_for_event
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    is_interactive_text,
    is_tool_result,
    model_turn,
    sent_texts,
    tool_result_contents,
)

pytestmark = [
    pytest.mark.skipif(sys.version_info < (3, 12), reason="the Nova Sonic extra needs Python 3.12+"),
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]


class Concierge(Agent):
    def __init__(self) -> None:
        from livekit.plugins.aws.experimental.realtime import RealtimeModel

        super().__init__(instructions="be brief", llm=RealtimeModel.with_nova_sonic_2())
        self.lookups: list[str] = []

    @function_tool
    async def lookup(self, q: str) -> str:
        """Look up the opening hours."""
        self.lookups.append(q)
        return "open 9 to 5"


def _answer(session: AgentSession[Any], text: str) -> asyncio.Future[Any]:
    """Resolves once the assistant message ``text`` is added to the history."""
    return asyncio.ensure_future(
        wait_for_event(
            session,
            "conversation_item_added",
            lambda ev: (
                isinstance(ev.item, llm.ChatMessage)
                and ev.item.role == "assistant"
                and ev.item.text_content == text
            ),
        )
    )


async def test_typed_turn_is_answered(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    bedrock.reply_when(is_interactive_text("when do you open?"), model_turn("We open at nine."))
    session = await make_session(Concierge())
    conn = await bedrock.connection(0)
    await conn.wait_ready()

    answered = _answer(session, "We open at nine.")
    await bounded(session.run(user_input="when do you open?"))
    await answered

    assert sent_texts(conn.sent) == [("SYSTEM", False, "be brief"), ("USER", True, "when do you open?")]
    texts = [(m.role, m.text_content) for m in session.history.messages() if m.text_content]
    assert texts == [("user", "when do you open?"), ("assistant", "We open at nine.")]
    assert len(bedrock.connections) == 1 and conn.violations == []


async def test_tool_call_is_answered_with_a_tool_result(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(
        is_interactive_text("when do you open?"), model_turn(tool=("tool-1", "lookup", {"q": "hours"}))
    )
    bedrock.reply_when(is_tool_result("tool-1"), model_turn("We open at nine."))
    agent = Concierge()
    session = await make_session(agent)
    conn = await bedrock.connection(0)
    await conn.wait_ready()

    answered = _answer(session, "We open at nine.")
    await bounded(session.run(user_input="when do you open?"))
    await answered

    assert agent.lookups == ["hours"]
    results = tool_result_contents(conn.sent)
    assert [tool_id for tool_id, _ in results] == ["tool-1"]
    assert "open 9 to 5" in json.dumps(json.loads(results[0][1]))
    calls = [i for i in session.history.items if i.type == "function_call"]
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [(c.call_id, c.name) for c in calls] == [("tool-1", "lookup")]
    assert [(o.call_id, o.output) for o in outputs] == [("tool-1", "open 9 to 5")]
    assert len(bedrock.connections) == 1 and conn.violations == []
