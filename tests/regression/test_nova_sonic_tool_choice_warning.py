"""Nova Sonic: no warning about ``tool_choice`` when nothing was asked that it cannot do.

The framework passes its tool choice to the realtime session's ``update_options()`` on every
option update (``None`` when the agent set none), and sets one and resets it around some
replies: the reply to an async tool's later result is asked with ``tool_choice="none"``, then
the choice is reset. Stock 1.8.9's ``RealtimeSession.update_options()`` logs a WARNING on every
call, whatever it is given, so every such reply logs two. It now warns only for a choice other
than the one the stream was opened with (``None`` and ``"auto"`` both leave it to the model),
once per choice.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from livekit.agents import NOT_GIVEN, Agent, RunContext, function_tool

from tests.fakes import Gate, MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    SentEvent,
    is_interactive_text,
    is_tool_result,
    model_turn,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: Nova Sonic warns about tool_choice on every follow-up reply"),
]

QUESTION = "book table 12"
UNSUPPORTED = "updating inference configuration options is not yet supported"


class Booker(Agent):
    """Its tool reports progress twice, then returns; the later steps wait for their gates."""

    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())
        self.gates = [Gate("second update"), Gate("final")]

    @function_tool
    async def book(self, ctx: RunContext, table: int) -> str:
        """Book a table."""
        await ctx.update("checking availability")
        await self.gates[0].wait()
        await ctx.update("holding the table")
        await self.gates[1].wait()
        return f"table {table} booked"


def _follow_up_for(call_id: str) -> Callable[[SentEvent], bool]:
    def _match(e: SentEvent) -> bool:
        text = e["event"].get("textInput", {}).get("content", "")
        return text.startswith("New results arrived") and call_id in text

    return _match


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "livekit.plugins.aws" and r.levelno >= logging.WARNING and UNSUPPORTED in r.getMessage()
    ]


@pytest.mark.parametrize("tool_choice", [NOT_GIVEN, None, "auto"], ids=["not-given", "none-value", "auto"])
async def test_no_request_no_warning(
    bedrock: FakeBedrock, make_session: MakeSession, caplog: pytest.LogCaptureFixture, tool_choice: Any
) -> None:
    agent = Booker()
    await nova_session(bedrock, make_session, agent)

    with caplog.at_level(logging.WARNING, logger="livekit.plugins.aws"):
        agent.realtime_llm_session.update_options(tool_choice=tool_choice)

    assert _warnings(caplog) == [], f"update_options(tool_choice={tool_choice!r}) asked for nothing"


async def test_async_tool_follow_ups_warn_once(
    bedrock: FakeBedrock, make_session: MakeSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="livekit.plugins.aws")
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "book", {"table": 12})))
    bedrock.reply_when(is_tool_result("tool-1"), model_turn("Checking."))
    bedrock.reply_when(is_interactive_text(), model_turn("Noted."), once=False)
    agent = Booker()
    session, _ = await nova_session(bedrock, make_session, agent)

    agent.gates[0].open()
    await bounded(session.run(user_input=QUESTION))
    # one follow-up reply for the second update, then one for the final result
    conn = bedrock.connections[0]
    await conn.wait_sent(_follow_up_for("tool-1_update_1"), what="the follow-up of the second update")
    agent.gates[1].open()
    await conn.wait_sent(_follow_up_for("tool-1_final"), what="the follow-up of the final result")
    await bounded(session.wait_for_idle())

    assert len(_warnings(caplog)) <= 1, f"a tool_choice warning for each follow-up: {_warnings(caplog)}"
    assert bedrock.violations == []
