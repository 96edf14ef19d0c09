"""A reply to an async result queued, not started, as its agent starts leaving: the scenario
the livekit/agents#5841 close tests share (the regression for ``shutdown(drain=True)``, the
parity guard for ``aclose()``).

The front desk's model calls ``check_order`` (async) and ``transfer`` (returns the billing desk)
in one turn. ``check_order`` returns while ``transfer`` runs, so the reply to its result is
queued on the front desk (it waits out ``min_consecutive_speech_delay``); ``transfer`` then
returns the billing desk. :func:`start_queued_reply_handoff` returns with the front desk in its
``on_exit()``, held on ``journal.exit_gates["front"]``; the test closes the session its way.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import AgentSession, function_tool
from livekit.agents.llm.async_toolset import AsyncToolset

from .orders import BILLING, CALL_ID, FINAL_ID, FRONT, Billing, Front, OrderJournal, order_tool
from .realtime import scripted_model
from .script import Reply, tool_call
from .session import MakeSession
from .sync import Gate, bounded, wait_for_event

__all__ = ["QueuedReplyHandoff", "start_queued_reply_handoff"]

# long enough for the handoff to begin while the reply waits in the queue
SPEECH_DELAY = 0.5


@dataclass
class QueuedReplyHandoff:
    session: AgentSession[Any]
    journal: OrderJournal
    run: asyncio.Future[Any]
    # tool_reply_updated statuses of the replies to the result, by speech id
    statuses: dict[str, list[str]] = field(default_factory=dict)

    def said(self) -> list[str]:
        return [
            i.text_content or ""
            for i in self.session.history.items
            if i.type == "message" and i.role == "assistant"
        ]

    def outputs(self) -> list[Any]:
        return [
            i
            for i in self.session.history.items
            if i.type == "function_call_output" and i.call_id == FINAL_ID
        ]


def _answer(instructions: str | None) -> str:
    return {FRONT: "Front desk here.", BILLING: "Billing here."}.get(instructions or "", "ok")


async def start_queued_reply_handoff(make_session: MakeSession, kind: str, scope: str) -> QueuedReplyHandoff:
    """``kind``: a :func:`scripted_model` kind; ``scope``: ``session_toolset`` or ``agent_toolset``."""
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
        fallback=lambda call: _answer(call.instructions),
    )
    session: AgentSession[Any] = await make_session(
        front, llm=model, min_consecutive_speech_delay=SPEECH_DELAY, **kwargs
    )
    run = asyncio.ensure_future(session.run(user_input="Where is my order? Then billing, please."))
    handoff = QueuedReplyHandoff(session, journal, run)

    @session.on("tool_execution_updated")
    def _on_update(ev: Any) -> None:
        if ev.update.type == "tool_reply_updated" and FINAL_ID in ev.update.update_ids:
            handoff.statuses.setdefault(ev.update.speech_id, []).append(ev.update.status)

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
    return handoff
