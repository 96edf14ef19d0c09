"""Guards for Nova Sonic's stream start and session recycles: what stock 1.8.9 already does
right next to what the recycle patches change. A new stream sends its history before the audio
input, and the audio input before any interactive text; a recycle with no tool in flight keeps
the conversation in the new stream's history; a tool call the new stream issued is answered with
a ``toolResult`` on that stream; the timed recycle waits for the assistant to finish speaking
before it ends the old stream. Each holds on stock and on the fork.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session; ``FakeBedrock.fire_recycle_timer()`` makes the recycle timer fire at once.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from livekit.agents import Agent, function_tool, llm

from tests.fakes import MakeSession, bounded, wait_for_event
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    SentEvent,
    audio_block,
    completion_end,
    completion_start,
    event_kind,
    is_interactive_text,
    is_tool_result,
    model_turn,
    next_recycle,
    sent_texts,
    text_block,
    tool_result_contents,
    usage,
)
from tests.fakes.history import message_added
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [*NOVA_SONIC_MARKS]

# stock waits for a second of audio silence before it ends the old stream
BOUND = 8.0


@function_tool
async def cancel_booking(table: int) -> str:
    """Cancel a booking."""
    return f"table {table} cancelled"


class Concierge(Agent):
    def __init__(self, chat_ctx: llm.ChatContext | None = None) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2(), chat_ctx=chat_ctx)
        self.lookups: list[str] = []

    @function_tool
    async def lookup(self, q: str) -> str:
        """Look up the opening hours."""
        self.lookups.append(q)
        return "open 9 to 5"


def _audio_start(e: SentEvent) -> bool:
    return event_kind(e) == "contentStart" and e["event"]["contentStart"].get("type") == "AUDIO"


def _interactive_text_start(e: SentEvent) -> bool:
    start = e["event"].get("contentStart", {})
    return start.get("type") == "TEXT" and bool(start.get("interactive"))


async def test_history_then_audio_then_interactive_text(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    history = llm.ChatContext.empty()
    history.add_message(role="user", content="my name is Ana")
    history.add_message(role="assistant", content="Hi Ana.")
    bedrock.reply_when(is_interactive_text("when do you open?"), model_turn("We open at nine."))
    session, conn = await nova_session(bedrock, make_session, Concierge(chat_ctx=history))
    answered = message_added(session, "assistant", "We open at nine.")
    await bounded(session.run(user_input="when do you open?"))
    await answered

    kinds = [event_kind(e) for e in conn.sent]
    assert kinds[:2] == ["sessionStart", "promptStart"]
    audio = next(i for i, e in enumerate(conn.sent) if _audio_start(e))
    typed = next(i for i, e in enumerate(conn.sent) if _interactive_text_start(e))
    assert sent_texts(conn.sent[:audio]) == [
        ("SYSTEM", False, "be brief"),
        ("USER", False, "my name is Ana"),
        ("ASSISTANT", False, "Hi Ana."),
    ]
    assert audio < typed
    assert conn.violations == []


async def test_recycle_keeps_the_conversation(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    bedrock.reply_when(
        is_interactive_text("when do you open?"), model_turn(tool=("tool-2", "lookup", {"q": "hours"}))
    )
    bedrock.reply_when(is_tool_result("tool-2"), model_turn("We open at nine."))
    agent = Concierge()
    session = await make_session(agent)
    old = await bedrock.connection(0)
    await old.wait_ready()
    await bounded(session.run(user_input="hi"))

    await agent.update_tools([*agent.tools, cancel_booking])  # the tool set changes: a recycle
    new = await bedrock.connection(1)
    await new.wait_ready()
    history = [(role, text) for role, interactive, text in sent_texts(new.sent) if not interactive]
    assert [role for role, _ in history] == ["SYSTEM", "USER", "ASSISTANT"]
    assert history[1] == ("USER", "hi") and "Hello there." in history[2][1]
    assert "cancel_booking" in str(next(e for e in new.sent if event_kind(e) == "promptStart"))
    assert old.closed

    # a call the new stream issued is answered with a toolResult on it
    answered = message_added(session, "assistant", "We open at nine.")
    await bounded(session.run(user_input="when do you open?"))
    await answered
    assert agent.lookups == ["hours"]
    assert [tool_id for tool_id, _ in tool_result_contents(new.sent)] == ["tool-2"]
    assert tool_result_contents(old.sent) == []
    assert bedrock.violations == []


class _Logged(logging.Handler):
    """Resolves ``fut`` on the first record whose message contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage() and not self.fut.done():
            self.fut.set_result(None)


async def test_timed_recycle_waits_for_the_assistant_to_finish(
    bedrock: FakeBedrock,
    make_session: MakeSession,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello there."))
    session = await make_session(Concierge())
    old = await bedrock.connection(0)
    await old.wait_ready()
    await bounded(session.run(user_input="hi"))  # (stock recycles once the assistant spoke)

    # the assistant starts a second turn and is still speaking
    speaking = asyncio.ensure_future(
        wait_for_event(session, "agent_state_changed", lambda ev: ev.new_state == "speaking")
    )
    audio = audio_block(completion_id="c2")
    old.push(
        completion_start("c2"),
        text_block("ASSISTANT", "Let me think.", stage="SPECULATIVE", completion_id="c2"),
        audio[:2],
    )
    await speaking
    recycled = next_recycle(monkeypatch)
    caplog.set_level(logging.INFO, logger="livekit.plugins.aws")
    logger = logging.getLogger("livekit.plugins.aws")
    fired = _Logged("Session duration limit reached")
    logger.addHandler(fired)
    try:
        bedrock.fire_recycle_timer(bedrock.sessions[0])
        await bounded(fired.fut, what="the recycle timer to fire")
    finally:
        logger.removeHandler(fired)
    assert "promptEnd" not in [event_kind(e) for e in old.sent], "the old stream ended mid-sentence"

    # the audio turn ends: now the old stream ends, and a new one opens
    old.push(
        audio[2:],
        text_block("ASSISTANT", "Let me think.", stage="FINAL", stop_reason="END_TURN", completion_id="c2"),
        usage("c2"),
        completion_end("c2"),
    )
    await old.wait_sent(lambda e: event_kind(e) == "promptEnd", timeout=BOUND, what="the old prompt's end")
    await bedrock.connection(1, timeout=BOUND)
    if await bounded(recycled, BOUND, what="the recycle to end") == "cancelled":
        # stock's timed recycle cancels itself once it opened the new stream (what the
        # regression tests pin) and leaves the dead session's next timer running: stop it, so
        # this guard checks only what it pins
        bedrock.sessions[0]._session_recycle_task.cancel()


async def test_stream_error_restart_answers_the_question(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    """A retryable stream error before the model answered: the new stream asks the question."""
    from aws_sdk_bedrock_runtime.models import ModelStreamErrorException

    question = "when do you open?"
    bedrock.reply_when(
        is_interactive_text(question),
        lambda conn, sent: model_turn("We open at nine.") if conn.index == 1 else [],
        once=False,
    )
    session = await make_session(Concierge())
    old = await bedrock.connection(0)
    await old.wait_ready()
    answered = message_added(session, "assistant", "We open at nine.")
    asked = asyncio.ensure_future(session.run(user_input=question))
    await old.wait_sent(is_interactive_text(question), what="the question")
    old.fail(ModelStreamErrorException(message="stream error"))

    new = await bedrock.connection(1, timeout=BOUND)
    await new.wait_ready()
    await bounded(answered, BOUND, what="the answer on the new stream")
    await bounded(asked, BOUND, what="session.run() of the question")
    assert [t for _, interactive, t in sent_texts(new.sent) if interactive] == [question]
    assert bedrock.violations == []


async def test_recycle_after_an_unanswered_spoken_turn_asks_it(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    """Nova Sonic 2: a spoken turn the model had not answered when the tools changed is sent
    to the new stream as interactive text, so the model answers it there."""
    spoken = "what time do you close"
    agent = Concierge()
    await make_session(agent)
    old = await bedrock.connection(0)
    await old.wait_ready()

    heard = asyncio.ensure_future(
        wait_for_event(
            bedrock.sessions[0], "input_audio_transcription_completed", lambda ev: spoken in ev.transcript
        )
    )
    old.push(completion_start("c2"), text_block("USER", spoken, completion_id="c2"), completion_end("c2"))
    await heard
    await agent.update_tools([*agent.tools, cancel_booking])
    new = await bedrock.connection(1, timeout=BOUND)
    await new.wait_sent(is_interactive_text(spoken), timeout=BOUND, what="the spoken turn, asked again")
    assert [t for _, interactive, t in sent_texts(new.sent) if interactive] == [spoken]
    assert bedrock.violations == []
