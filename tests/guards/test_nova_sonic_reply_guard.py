"""Guards for Nova Sonic 2 next to the lines the plugin's generate_reply, update_options and
update_chat_ctx fixes change: what stock 1.8.9 already does right, and the fork keeps.

* ``generate_reply(instructions=...)`` sends the instructions as interactive USER text, once,
  and its speech ends with the model's answer;
* ``update_options()`` with a tool choice the model cannot apply mid-session warns;
* user text the agent adds with ``update_chat_ctx()`` (typed, not spoken) goes to the model as
  interactive text.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session."""

from __future__ import annotations

import logging

import pytest
from livekit.agents import Agent
from livekit.agents.voice import SpeechHandle

from tests.fakes import MakeSession, bounded
from tests.fakes.bedrock_stream import FakeBedrock, event_kind, is_interactive_text, model_turn, sent_texts
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [*NOVA_SONIC_MARKS]

INSTRUCTIONS = "Greet the caller."
GREETING = "Hello, how can I help?"
QUESTION = "when do you open?"
ANSWER = "We open at nine."


class Greeter(Agent):
    def __init__(self, instructions: str | None = INSTRUCTIONS) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self._greet = instructions
        self.greeting: SpeechHandle | None = None

    async def on_enter(self) -> None:
        if self._greet is not None:
            self.greeting = self.session.generate_reply(instructions=self._greet)


async def test_reply_with_instructions_sends_them_as_interactive_text(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(is_interactive_text(INSTRUCTIONS), model_turn(GREETING))
    agent = Greeter()
    _, conn = await nova_session(bedrock, make_session, agent)
    assert agent.greeting is not None

    await bounded(agent.greeting.wait_for_playout(), what="the greeting's speech")

    assert [t for _, interactive, t in sent_texts(conn.sent) if interactive] == [INSTRUCTIONS]
    assert ("USER", True, INSTRUCTIONS) in sent_texts(conn.sent)
    assert bedrock.violations == []


async def test_unsupported_tool_choice_warns(
    bedrock: FakeBedrock, make_session: MakeSession, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Greeter(instructions=None)
    await nova_session(bedrock, make_session, agent)
    rt_session = agent.realtime_llm_session

    with caplog.at_level(logging.WARNING, logger="livekit.plugins.aws"):
        rt_session.update_options(tool_choice="required")

    warnings = [r for r in caplog.records if r.name == "livekit.plugins.aws" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


async def test_text_added_by_update_chat_ctx_is_sent(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(ANSWER))
    agent = Greeter(instructions=None)
    _, conn = await nova_session(bedrock, make_session, agent)

    ctx = agent.chat_ctx.copy()
    ctx.add_message(role="user", content=QUESTION)
    await bounded(agent.update_chat_ctx(ctx))
    await conn.wait_sent(is_interactive_text(QUESTION), what="the user text")

    assert [t for _, interactive, t in sent_texts(conn.sent) if interactive] == [QUESTION]
    assert bedrock.violations == []


async def test_close_ends_the_prompt_and_the_session(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    """An idle session's close ends its prompt and session on the stream, and closes it."""
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(ANSWER))
    session, conn = await nova_session(bedrock, make_session, Greeter(instructions=None))
    await bounded(session.run(user_input=QUESTION))
    await bounded(session.wait_for_idle())

    await bounded(session.aclose())

    kinds = [event_kind(e) for e in conn.sent]
    assert kinds[-2:] == ["promptEnd", "sessionEnd"]
    assert conn.closed and conn.sent_after_close == []
    assert bedrock.violations == []
