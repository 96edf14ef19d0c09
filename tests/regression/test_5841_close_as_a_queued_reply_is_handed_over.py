"""livekit/agents#5841 as the session closes: a reply to an async result, queued but not started
as its agent starts leaving, is not said by that agent once its ``on_exit()`` ran, even when
the session closes with ``shutdown(drain=True)`` during the handoff.

The front desk's model calls ``check_order`` (async) and ``transfer`` (returns the billing desk)
in one turn. ``check_order`` returns while ``transfer`` runs, so the reply to its result is
queued on the front desk (it waits out ``min_consecutive_speech_delay``); ``transfer`` then
returns the billing desk, and the session is shut down while the front desk is in ``on_exit()``.
The billing desk never starts (a closing session starts no agent), so nobody is left to answer
the result: it stays in the history, as a user turn the session closes on does, and the queued
reply ends ``interrupted``. On stock 1.8.9 the drain plays the front desk's reply to the result
after its ``on_exit()``. With ``aclose()`` both builds interrupt it (see the guard of the same
name).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession, function_tool
from livekit.agents.llm.async_toolset import AsyncToolset

from tests.fakes import MakeSession, Reply, bounded, scripted_model, tool_call, wait_for_event
from tests.fakes.orders import (
    BILLING,
    CALL_ID,
    FINAL_ID,
    FRONT,
    SHIPPED,
    Billing,
    Front,
    OrderJournal,
    order_tool,
)
from tests.fakes.sync import Gate

BUG = pytest.mark.upstream_bug("livekit/agents#5841")

# long enough for the handoff to begin while the reply waits in the queue
SPEECH_DELAY = 0.5


def answer(instructions: str | None) -> str:
    return {FRONT: "Front desk here.", BILLING: "Billing here."}.get(instructions or "", "ok")


def said(session: AgentSession[Any]) -> list[str]:
    return [
        i.text_content or "" for i in session.history.items if i.type == "message" and i.role == "assistant"
    ]


@BUG
@pytest.mark.parametrize("scope", ["session_toolset", "agent_toolset"])
@pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced"])
async def test_shutdown_while_a_queued_reply_is_handed_over(
    make_session: MakeSession, kind: str, scope: str
) -> None:
    journal = OrderJournal()
    transfer_gate = Gate("transfer")

    @function_tool(name="transfer")
    async def transfer() -> Any:
        """Put the caller through to billing."""
        await transfer_gate.wait()
        return Billing(journal)

    toolset = AsyncToolset(id="orders", tools=[order_tool(journal)])
    front = Front(journal, [transfer, *([toolset] if scope == "agent_toolset" else [])])
    kwargs: dict[str, Any] = {"tools": [toolset]} if scope == "session_toolset" else {}
    model = scripted_model(
        kind,
        [
            Reply(
                tool_calls=[
                    tool_call("check_order", call_id=CALL_ID),
                    tool_call("transfer", call_id="call_transfer"),
                ]
            )
        ],
        fallback=lambda call: answer(call.instructions),
    )
    session: AgentSession[Any] = await make_session(
        front, llm=model, min_consecutive_speech_delay=SPEECH_DELAY, **kwargs
    )

    statuses: dict[str, list[str]] = {}

    @session.on("tool_execution_updated")
    def _on_update(ev: Any) -> None:
        if ev.update.type == "tool_reply_updated" and FINAL_ID in ev.update.update_ids:
            statuses.setdefault(ev.update.speech_id, []).append(ev.update.status)

    run = asyncio.ensure_future(session.run(user_input="Where is my order? Then billing, please."))
    await journal.tool_gate.reached()
    await transfer_gate.reached()
    scheduled = asyncio.ensure_future(
        wait_for_event(
            session,
            "tool_execution_updated",
            lambda ev: ev.update.type == "tool_reply_updated" and ev.update.status == "scheduled",
        )
    )
    journal.tool_gate.open()
    await bounded(scheduled, what="the reply to the order result scheduled")
    transfer_gate.open()
    await bounded(journal.exiting["front"].wait(), what="front desk on_exit")

    closed = asyncio.ensure_future(wait_for_event(session, "close", lambda ev: True))
    session.shutdown(drain=True)
    journal.exit_gates["front"].open()
    await bounded(closed, what="the session closed")
    await asyncio.gather(run, return_exceptions=True)

    # the front desk finished its reply to its own batch (the one that hands off), and nobody
    # answered the result once its on_exit began: the result is in the history
    assert said(session) == ["Front desk here."], said(session)
    assert "enter billing" not in journal.events, journal.events
    outputs = [i for i in session.history.items if i.type == "function_call_output" and i.call_id == FINAL_ID]
    assert len(outputs) == 1 and outputs[0].output == SHIPPED
    # the reply queued for it ended, and says so
    assert list(statuses.values()) == [["scheduled", "interrupted"]], statuses
