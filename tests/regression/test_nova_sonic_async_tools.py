"""Nova Sonic: an async tool's later updates and final result reach the model.

An async tool (one that calls ``ctx.update()`` and returns later) under a real
``AgentSession``: its first update answers the model's toolUse as a ``toolResult``; every later
update (``<id>_update_N``) and the final result (``<id>_final``) are new function call outputs
that this stream never issued a toolUse for. Stock 1.8.9's ``RealtimeSession.update_chat_ctx()``
forwards only outputs whose call id is in ``_pending_tools`` and skips the rest without a log,
so the model only gets the framework's follow-up prompt ("New results arrived ... summarize")
and has nothing to summarize. Nova Sonic 2 now gets each such result as text marked as a tool
result (not as the user's words), before that prompt; a toolResult still goes only to a call the
stream issued. Nova Sonic 1 takes no text input: it logs one WARNING instead of dropping them
silently.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunContext, function_tool

from tests.fakes import Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    SentEvent,
    is_interactive_text,
    is_tool_result,
    model_turn,
    sent_texts,
    tool_result_contents,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: Nova Sonic drops an async tool's later updates and final result"),
]

QUESTION = "book table 12"
FOLLOW_UP = "New results arrived from background tool calls"
MARK = "This is a tool result, not the user speaking."


class Booker(Agent):
    """Its tool reports progress twice, then returns; each step waits for its gate."""

    def __init__(self, model: Any, gates: list[Gate]) -> None:
        super().__init__(instructions="be brief", llm=model)
        self.gates = gates

    @function_tool
    async def book(self, ctx: RunContext, table: int) -> str:
        """Book a table."""
        await ctx.update("checking availability")
        await self.gates[0].wait()
        await ctx.update("holding the table")
        await self.gates[1].wait()
        return f"table {table} booked"


def _nova2() -> Any:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    return RealtimeModel.with_nova_sonic_2()


def _is_follow_up(e: SentEvent) -> bool:
    return e["event"].get("textInput", {}).get("content", "").startswith(FOLLOW_UP)


async def _follow_up(bedrock: FakeBedrock, start: int) -> int:
    """Bounded wait for the framework's next follow-up prompt; its index in ``sent``."""
    conn = bedrock.connections[0]
    event = await conn.wait_sent(_is_follow_up, start=start, what="the follow-up prompt")
    return next(i for i, e in enumerate(conn.sent) if e is event)


def _texts_before(bedrock: FakeBedrock, index: int) -> list[tuple[str, bool, str]]:
    return sent_texts(bedrock.connections[0].sent[:index])


async def test_final_result_reaches_the_model(bedrock: FakeBedrock, make_session: MakeSession) -> None:
    gates = [Gate("second update"), Gate("final")]
    gates[0].open()
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.reply_when(is_tool_result("tool-1"), model_turn("Checking."))
    bedrock.reply_when(is_interactive_text(), model_turn("Noted."), once=False)
    session, _ = await nova_session(bedrock, make_session, Booker(_nova2(), gates))
    await bounded(session.run(user_input=QUESTION))

    # the second update, then the final result, each followed by the framework's prompt
    first = await _follow_up(bedrock, 0)
    gates[1].open()
    second = await _follow_up(bedrock, first + 1)

    update = _texts_before(bedrock, first)[-1]
    final = _texts_before(bedrock, second)[-1]
    assert final[2].endswith("table 12 booked"), f"the final result never reached the model: {final}"
    assert "holding the table" in update[2], f"the second update never reached the model: {update}"
    for role, interactive, text in (update, final):
        assert MARK in text and not interactive and role == "USER"
    assert "tool-1_update_1" in update[2] and "tool-1_final" in final[2]

    conn = bedrock.connections[0]
    # a toolResult only answers the call this stream issued, once
    assert [tool_id for tool_id, _ in tool_result_contents(conn.sent)] == ["tool-1"]
    texts = [t for _, _, t in sent_texts(conn.sent)]
    assert sum("table 12 booked" in t for t in texts) == 1
    assert sum("holding the table" in t for t in texts) == 1
    assert not any("checking availability" in t for t in texts), "the first update went out twice"
    # the user never said it
    assert all(MARK not in (m.text_content or "") for m in session.history.messages() if m.role == "user")
    assert bedrock.violations == []


async def test_nova_sonic_1_warns_once(
    bedrock: FakeBedrock, make_session: MakeSession, caplog: pytest.LogCaptureFixture
) -> None:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    caplog.set_level(logging.WARNING, logger="livekit.plugins.aws")
    gates = [Gate("second update"), Gate("final")]
    gates[0].open()
    gates[1].open()
    bedrock.reply_when(is_tool_result("tool-1"), model_turn("Checking."))
    agent = Booker(RealtimeModel.with_nova_sonic_1(), gates)
    session, _ = await nova_session(bedrock, make_session, agent)
    conn = bedrock.connections[0]

    # Sonic 1 takes no typed turns: the model calls the tool on its own
    conn.push(model_turn(tool=("tool-1", "book", {"table": 12})))
    await conn.wait_sent(is_tool_result("tool-1"), what="the first update")
    await bounded(_final_recorded(session))
    await bounded(session.wait_for_idle())

    dropped = [r for r in caplog.records if "not sent to it" in r.getMessage()]
    assert len(dropped) == 1, f"expected one WARNING for the results Sonic 1 cannot take, got {dropped}"
    assert dropped[0].levelno == logging.WARNING
    texts = [t for _, _, t in sent_texts(conn.sent)]
    assert not any("holding the table" in t or "table 12 booked" in t for t in texts)
    assert bedrock.violations == []


async def _final_recorded(session: AgentSession[Any]) -> None:
    """Until the tool's final result is in the history."""
    from tests.fakes import wait_for_event

    if any(i.type == "function_call_output" and i.call_id == "tool-1_final" for i in session.history.items):
        return
    await wait_for_event(
        session,
        "function_tools_executed",
        lambda ev: any(o is not None and o.call_id == "tool-1_final" for o in ev.function_call_outputs),
    )
