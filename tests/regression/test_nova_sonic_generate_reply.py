"""Nova Sonic: ``generate_reply()`` without instructions gets a reply, or fails in its timeout.

An agent that greets from its ``on_enter`` with ``self.session.generate_reply()`` (no
instructions) on Nova Sonic 2: stock 1.8.9's ``RealtimeSession.generate_reply()`` returns a
future nothing ever resolves when no user text is on its way, so the greeting's speech never
ends, and every typed turn after it waits behind it. Nova Sonic generates only in answer to
interactive input: the plugin now prompts the model to take its turn, and the future fails
with a ``RealtimeError`` after ``generate_reply_timeout`` if the model stays silent, as a reply
asked for with instructions does.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession
from livekit.agents.voice import SpeechHandle

from tests.fakes import DEFAULT_TIMEOUT, MakeSession, bounded
from tests.fakes.bedrock_stream import FakeBedrock, is_interactive_text, model_turn, sent_texts
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: Nova Sonic generate_reply() without instructions never resolves"),
]

GREETING = "Hello, how can I help?"
QUESTION = "when do you open?"
ANSWER = "We open at nine."
# the model's own generate_reply timeout, for the silent model (the default is 10 s)
REPLY_TIMEOUT = 0.5


class Greeter(Agent):
    """Asks for a reply in on_enter, with no instructions."""

    def __init__(self, *, reply_timeout: float = 10.0) -> None:
        from livekit.plugins.aws.experimental.realtime import RealtimeModel

        super().__init__(
            instructions="be brief",
            llm=RealtimeModel.with_nova_sonic_2(generate_reply_timeout=reply_timeout),
        )
        self.greeting: SpeechHandle | None = None

    async def on_enter(self) -> None:
        self.greeting = self.session.generate_reply()


async def _ends_within(handle: SpeechHandle | None, timeout: float) -> bool:
    """Whether ``handle`` is done within ``timeout`` (False, not an exception, if not)."""
    assert handle is not None, "on_enter asked for no reply"
    waiter = asyncio.ensure_future(handle.wait_for_playout())
    done, _ = await asyncio.wait({waiter}, timeout=timeout)
    if not done:
        waiter.cancel()
    return bool(done)


def _history(session: AgentSession[Any]) -> list[tuple[str, str]]:
    return [(m.role, m.text_content or "") for m in session.history.messages()]


def _interactive(bedrock: FakeBedrock) -> list[str]:
    return [t for role, interactive, t in sent_texts(bedrock.connections[0].sent) if interactive]


async def test_on_enter_reply_without_instructions_is_answered(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(ANSWER))
    # the model answers the first other prompt it gets with its greeting
    bedrock.reply_when(is_interactive_text(), model_turn(GREETING))
    agent = Greeter()
    session, _ = await nova_session(bedrock, make_session, agent)

    assert await _ends_within(agent.greeting, DEFAULT_TIMEOUT), (
        "generate_reply() without instructions never resolved: its speech holds every later turn"
    )
    assert _history(session) == [("assistant", GREETING)]

    result = await bounded(session.run(user_input=QUESTION), what="the typed turn after the greeting")
    assert [ev.item.text_content for ev in result.events if ev.type == "message"] == [ANSWER]
    assert _history(session) == [("assistant", GREETING), ("user", QUESTION), ("assistant", ANSWER)]
    # one prompt for the greeting (not the user's words), then the typed turn
    prompts = _interactive(bedrock)
    assert len(prompts) == 2 and prompts[1] == QUESTION and "not the user speaking" in prompts[0]
    assert bedrock.violations == []


@pytest.mark.allow_error_logs(r"failed to generate a reply")
async def test_on_enter_reply_fails_in_its_timeout_when_the_model_is_silent(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    """The model never answers the prompt: the greeting fails after generate_reply_timeout
    (the framework logs it) and the typed turn after it is still answered."""
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(ANSWER))
    agent = Greeter(reply_timeout=REPLY_TIMEOUT)
    session, _ = await nova_session(bedrock, make_session, agent)

    assert await _ends_within(agent.greeting, REPLY_TIMEOUT + DEFAULT_TIMEOUT), (
        "generate_reply() without instructions neither resolved nor failed in its timeout"
    )
    assert _history(session) == []

    result = await bounded(session.run(user_input=QUESTION), what="the typed turn after the greeting")
    assert [ev.item.text_content for ev in result.events if ev.type == "message"] == [ANSWER]
    assert _history(session) == [("user", QUESTION), ("assistant", ANSWER)]
    assert bedrock.violations == []
