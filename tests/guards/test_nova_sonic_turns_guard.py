"""Guards for Nova Sonic 2 (``modalities="mixed"``) driven by a real ``AgentSession``: a typed
turn is sent as interactive text and the model's answer lands in the history; a tool call is
run and answered with a ``toolResult`` for the id the connection issued, and the model's answer
to it lands too. Both hold on stock 1.8.9 and on the fork.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock bidirectional stream under
the plugin's own session, so the assertions are on the events that would go on the wire."""

from __future__ import annotations

import json

from livekit.agents import Agent, function_tool

from tests.fakes import MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    is_interactive_text,
    is_tool_result,
    model_turn,
    sent_texts,
    tool_result_contents,
)
from tests.fakes.history import message_added
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [*NOVA_SONIC_MARKS]


class Concierge(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.lookups: list[str] = []

    @function_tool
    async def lookup(self, q: str) -> str:
        """Look up the opening hours."""
        self.lookups.append(q)
        return "open 9 to 5"


async def test_typed_turn_is_answered(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    bedrock.reply_when(is_interactive_text("when do you open?"), model_turn("We open at nine."))
    session, conn = await nova_session(bedrock, make_session, Concierge())

    answered = message_added(session, "assistant", "We open at nine.")
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
    session, conn = await nova_session(bedrock, make_session, agent)

    answered = message_added(session, "assistant", "We open at nine.")
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
