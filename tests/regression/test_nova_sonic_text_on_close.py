"""Nova Sonic: closing the session stops the text it is still sending.

User text (a typed turn, or text the agent adds with ``update_chat_ctx()``), a tool result sent
as text and a ``generate_reply()`` prompt each go out from a task of the plugin's
``RealtimeSession``, which waits for the stream and for the text block before it. Stock 1.8.9's
``RealtimeSession.aclose()`` leaves those tasks running: once ``AgentSession.aclose()`` has
returned, the text still goes out, after the session's prompt end, on a closed stream, or its
task waits for good. They are now cancelled, and awaited, before the prompt end.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session; it holds the text block's start on the wire until the test lets it through.
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import Agent

from tests.fakes import DEFAULT_TIMEOUT, Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import FakeBedrock, SentEvent, event_kind
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: Nova Sonic keeps sending text after the session closed"),
]

QUESTION = "when do you open?"


class Concierge(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())


def _interactive_text_start(e: SentEvent) -> bool:
    body = e["event"].get("contentStart", {})
    return event_kind(e) == "contentStart" and body.get("type") == "TEXT" and bool(body.get("interactive"))


def _text_tasks() -> list[asyncio.Task[object]]:
    return [
        t for t in asyncio.all_tasks() if t.get_name().startswith("RealtimeSession._send") and not t.done()
    ]


async def test_close_stops_the_text_in_flight(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    agent = Concierge()
    session, conn = await nova_session(bedrock, make_session, agent)
    held = Gate("the user text on the wire")
    conn.hold_matching = (_interactive_text_start, held)

    ctx = agent.chat_ctx.copy()
    ctx.add_message(role="user", content=QUESTION)
    await bounded(agent.update_chat_ctx(ctx))
    await bounded(held.reached(), what="the user text to start going out")
    try:
        await bounded(session.aclose(), DEFAULT_TIMEOUT, what="AgentSession.aclose")

        assert conn.closed
        assert _text_tasks() == [], "text of the closed session still on its way"
    finally:
        held.open()  # let a task left running finish, on the closed stream

    assert conn.sent_after_close == [] and bedrock.violations == []
