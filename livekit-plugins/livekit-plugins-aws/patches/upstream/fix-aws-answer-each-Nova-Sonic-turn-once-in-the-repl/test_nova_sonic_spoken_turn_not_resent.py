"""Nova Sonic: a spoken turn is not sent back to the model as typed text.

Nova Sonic transcribes the user's speech itself, and the framework records the transcript it
reports as a user message in the agent's chat context. When the session is next given that
context (the agent adds a note with ``update_chat_ctx()``, an async tool reports an update),
only what is new may go to the model: before the fix the framework's message for the spoken
turn was taken for new user text and sent as interactive text, so the model was asked the
same question again.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from livekit.agents import Agent

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

QUESTION = "can I book a table?"
NOTE = "The caller is a regular."


class Host(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You book tables.")


async def test_spoken_turn_not_resent_when_the_agent_updates_its_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    agent = Host()
    async with offline_session() as session:
        heard = asyncio.Event()
        session.on(
            "conversation_item_added",
            lambda ev: (
                ev.item.type == "message" and ev.item.text_content == QUESTION and heard.set()
            ),
        )
        await session.start(agent)
        stream = await bedrock.stream(0)

        # the user asks aloud: Nova transcribes it and answers
        stream.push(model_turn("Which day?", user=QUESTION))
        await asyncio.wait_for(heard.wait(), TIMEOUT)  # the framework recorded the turn
        await asyncio.wait_for(session.wait_for_idle(), TIMEOUT)

        ctx = agent.chat_ctx.copy()
        ctx.add_message(role="user", content=NOTE)
        await agent.update_chat_ctx(ctx)
        await bedrock.wait_for(lambda: ("USER", True, NOTE) in stream.texts(), "the note")

        typed = [t for role, interactive, t in stream.texts() if role == "USER" and interactive]
        assert QUESTION not in typed, "the spoken question went to the model again, as text"
        assert typed == [NOTE]
