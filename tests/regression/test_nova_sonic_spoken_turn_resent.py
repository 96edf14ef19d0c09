"""Nova Sonic: a spoken turn is not sent back to the model as typed text.

When the user speaks, Nova Sonic transcribes the turn itself and the framework records the
final transcript as a user message in the agent's chat context, under the transcript's
``item_id``. The plugin keeps its own copy of the transcript under another id, so stock 1.8.9's
``RealtimeSession.update_chat_ctx()`` takes the framework's message for new user text the next
time it is given the agent's context (an async tool's update, or the agent updating its
context) and sends it as interactive text: the model is asked the user's question a second time
and answers it again. The plugin now knows the transcripts it reported as speech already heard.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import pytest
from livekit.agents import Agent, RunContext, function_tool

from tests.fakes import Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    SentEvent,
    is_interactive_text,
    is_tool_result,
    model_turn,
    sent_texts,
)
from tests.fakes.history import message_added
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: Nova Sonic sends a spoken turn's transcript again as typed text"),
]

QUESTION = "can I book a table?"
BOOK = "book table 12"
NOTE = "The caller is a regular."


class Booker(Agent):
    """Its tool reports progress twice, then returns; the second update waits for its gate."""

    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.gate = Gate("second update")

    @function_tool
    async def book(self, ctx: RunContext, table: int) -> str:
        """Book a table."""
        await ctx.update("checking availability")
        await self.gate.wait()
        await ctx.update("holding the table")
        return f"table {table} booked"


def _is_follow_up(e: SentEvent) -> bool:
    return e["event"].get("textInput", {}).get("content", "").startswith("New results arrived")


def _typed(bedrock: FakeBedrock, text: str) -> int:
    """How many times ``text`` went to the model as interactive (typed) USER text."""
    return sum(
        1
        for role, interactive, t in sent_texts(bedrock.connections[0].sent)
        if role == "USER" and interactive and t == text
    )


async def test_spoken_turn_not_resent_by_an_async_tool_update(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    """The user asks aloud, then types a request the model answers with an async tool, whose
    second update reaches the plugin with the agent's chat context, the transcript included."""
    bedrock.reply_when(is_interactive_text(BOOK), model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.reply_when(is_tool_result("tool-1"), model_turn("Checking."))
    bedrock.reply_when(is_interactive_text(), model_turn("Noted."), once=False)
    agent = Booker()
    session, _ = await nova_session(bedrock, make_session, agent)
    conn = bedrock.connections[0]

    said = message_added(session, "user", QUESTION)
    conn.push(model_turn("Which table?", user=QUESTION))
    await said
    await bounded(session.wait_for_idle())

    await bounded(session.run(user_input=BOOK))
    await conn.wait_sent(is_tool_result("tool-1"), what="the first update")
    agent.gate.open()
    await conn.wait_sent(_is_follow_up, what="the follow-up of the second update")
    await bounded(session.wait_for_idle())

    assert _typed(bedrock, QUESTION) == 0, "the spoken question went to the model again, as typed text"
    assert _typed(bedrock, BOOK) == 1
    assert bedrock.violations == []


async def test_spoken_turn_not_resent_when_the_agent_updates_its_context(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    """After a spoken turn the agent adds a note to its context: only the note is new."""
    agent = Booker()
    session, _ = await nova_session(bedrock, make_session, agent)
    conn = bedrock.connections[0]

    said = message_added(session, "user", QUESTION)
    conn.push(model_turn("Which day?", user=QUESTION))
    await said
    await bounded(session.wait_for_idle())

    ctx = agent.chat_ctx.copy()
    ctx.add_message(role="user", content=NOTE)
    await bounded(agent.update_chat_ctx(ctx))
    await conn.wait_sent(is_interactive_text(NOTE), what="the note")

    assert _typed(bedrock, QUESTION) == 0, "the spoken question went to the model again, as typed text"
    assert _typed(bedrock, NOTE) == 1
    assert bedrock.violations == []
