"""Nova Sonic: every server generation is announced once, and no turn adds an empty user message.

Nova Sonic 2 (``modalities="mixed"``) under a real ``AgentSession``. Stock 1.8.9 emits
``generation_created`` twice for each generation: once when the plugin creates it
(``_create_response_generation``, on completionStart) and again from its turn tracker when the
first ASSISTANT SPECULATIVE text or TOOL block of that generation arrives. The first event also
resolves the future ``generate_reply()`` returned, with ``user_initiated=False``, so the
framework starts a server-initiated reply for it as well. Up to three speech handles then read
one generation's streams and split its messages and tool calls between them: ``session.run()``
returns before the model's turn with no events, and the reply the caller awaited is empty. The
turn tracker also reports a final user transcript for every model turn, an empty one when the
user typed or the model answers a tool result, which adds an empty user message to the history.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunResult, function_tool

from tests.fakes import MakeSession, bounded, wait_for_event
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

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: Nova Sonic announces each generation twice; run() returns empty"),
]

QUESTION = "when do you open?"
ANSWER = "We open at nine."


class Concierge(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.lookups: list[str] = []

    @function_tool
    async def lookup(self, q: str) -> str:
        """Look up the opening hours."""
        self.lookups.append(q)
        return "open 9 to 5"


def _speeches(session: AgentSession[Any]) -> list[Any]:
    speeches: list[Any] = []
    session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))
    return speeches


def _run_items(result: RunResult[Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for ev in result.events:
        if ev.type == "message":
            out.append((f"message/{ev.item.role}", ev.item.text_content or ""))
        elif ev.type == "function_call":
            out.append(("function_call", ev.item.call_id))
        elif ev.type == "function_call_output":
            out.append(("function_call_output", ev.item.output))
    return out


def _history(session: AgentSession[Any]) -> list[tuple[str, str]]:
    return [(m.role, m.text_content or "") for m in session.history.messages()]


async def test_typed_turn_run_holds_the_answer(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(ANSWER))
    session, _ = await nova_session(bedrock, make_session, Concierge())
    speeches = _speeches(session)

    result = await bounded(session.run(user_input=QUESTION))

    assert _run_items(result) == [("message/assistant", ANSWER)], "run() returned without the answer"
    assert len(speeches) == 1, f"one generation, {len(speeches)} speeches"
    assert _history(session) == [("user", QUESTION), ("assistant", ANSWER)]
    assert bedrock.violations == []


async def test_tool_turn_run_holds_call_output_and_answer(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "lookup", {"q": "hours"})))
    bedrock.reply_when(is_tool_result("tool-1"), model_turn(ANSWER))
    agent = Concierge()
    session, _ = await nova_session(bedrock, make_session, agent)
    speeches = _speeches(session)

    result = await bounded(session.run(user_input=QUESTION))

    assert _run_items(result) == [
        ("function_call", "tool-1"),
        ("function_call_output", "open 9 to 5"),
        ("message/assistant", ANSWER),
    ], "run() returned before the model's turn"
    # the reply to the typed turn, then the model's own reply to the tool result
    assert len(speeches) == 2, f"two generations, {len(speeches)} speeches"
    assert _history(session) == [("user", QUESTION), ("assistant", ANSWER)], "an empty user message"
    assert agent.lookups == ["hours"]
    assert [i for i, _ in tool_result_contents(bedrock.connections[0].sent)] == ["tool-1"]
    assert bedrock.violations == []


async def test_spoken_turn_is_one_speech(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    """A turn the server starts on its own (the user spoke): one server-initiated reply, which
    the user's transcript (streamed after completionStart) does not interrupt."""
    session, _ = await nova_session(bedrock, make_session, Concierge())
    speeches = _speeches(session)
    conn = bedrock.connections[0]

    # the usage event closes the completion: every reply to it has been scheduled by then
    usage_seen = asyncio.ensure_future(wait_for_event(session, "metrics_collected"))
    conn.push(model_turn(ANSWER, user=QUESTION))
    await usage_seen
    await bounded(session.wait_for_idle())

    assert _history(session) == [("user", QUESTION), ("assistant", ANSWER)], "the answer was lost"
    assert len(speeches) == 1, f"one generation, {len(speeches)} speeches"
    assert not speeches[0].interrupted
    assert bedrock.violations == []


async def test_text_pushed_by_update_chat_ctx_is_answered_once(
    bedrock: FakeBedrock, make_session: MakeSession
) -> None:
    """User text the agent adds with update_chat_ctx() (no generate_reply()) is still answered,
    by one server-initiated reply."""
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(ANSWER))
    agent = Concierge()
    session, _ = await nova_session(bedrock, make_session, agent)
    speeches = _speeches(session)

    answered = message_added(session, "assistant", ANSWER)
    ctx = agent.chat_ctx.copy()
    ctx.add_message(role="user", content=QUESTION)
    await bounded(agent.update_chat_ctx(ctx))
    await answered

    assert ("USER", True, QUESTION) in sent_texts(bedrock.connections[0].sent)
    assert len(speeches) == 1, f"one generation, {len(speeches)} speeches"
    assert bedrock.violations == []
