"""An async tool returns, after ``ctx.update()``, an agent the
session cannot hand off to (it runs in another session).

``_ToolExecutor._resolve_handoff()`` refuses it at delivery and rewrites the final output
in place (``_refuse_handoff``). But ``_enqueue_reply()`` already sent that output, as the tool
returned it, to the realtime session when the result came in: the rewrite reaches the
agent's context and the history, never the model. A realtime model is told "Transferring
you now" and answers as if the transfer were happening, while the caller stays where they
are. Stock 1.8.9 refuses every deferred handoff, but with the error as the output it sends,
so the model knows.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, RunContext, function_tool

from tests import fakes
from tests.fakes import (
    MODEL_KINDS,
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    scripted_model,
    tool_call,
    wait_for_event,
)

DESK = "You are the desk."
TRANSFER = "Transferring you now"
CALL_ID = "call_transfer"
FINAL_ID = f"{CALL_ID}_final"


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, elsewhere: Agent, gate: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.elsewhere = elsewhere
        self.gate = gate

    @function_tool
    async def transfer(self, ctx: RunContext) -> tuple[Agent, str]:
        """Put the caller through to the other line."""
        await ctx.update("checking the line")
        await self.gate.wait()
        return self.elsewhere, TRANSFER


def final_outputs_seen(model: Any) -> list[tuple[str, bool]]:
    """The `_final` output of every request the model answered after the return."""
    if isinstance(model, ScriptedLLM):
        ctxs = [c.chat_ctx for c in model.calls]
    else:
        ctxs = [g.chat_ctx for g in model.generations]
    seen: list[tuple[str, bool]] = []
    for ctx in ctxs:
        for i in ctx.items:
            if i.type == "function_call_output" and i.call_id == FINAL_ID:
                seen.append((str(i.output), i.is_error))
    return seen


@pytest.mark.allow_error_logs(r"returned an Agent after ctx.update\(\)")
@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_model_is_told_a_deferred_handoff_did_not_happen(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    elsewhere = JournalingAgent(journal, name="elsewhere", instructions="You are on the other line.")
    await make_session(elsewhere, llm=scripted_model(kind, fallback="other line"))
    gate = Gate("transfer")
    model = scripted_model(
        kind, [Reply(tool_calls=[tool_call("transfer", call_id=CALL_ID)])], fallback="Desk here."
    )
    desk = Desk(journal, elsewhere, gate)
    session = await make_session(desk, llm=model)

    await bounded(session.run(user_input="put me through"), what="transfer turn")
    replied = wait_for_event(
        session,
        "tool_execution_updated",
        lambda ev: (
            ev.update.type == "tool_reply_updated"
            and FINAL_ID in ev.update.update_ids
            and ev.update.status in ("completed", "skipped", "interrupted")
        ),
    )
    replied_fut = asyncio.ensure_future(replied)
    gate.open()
    await bounded(replied_fut, what="the reply to the refused transfer")

    assert session.current_agent is desk
    seen = final_outputs_seen(model)
    assert seen, "no request saw the transfer's result"
    # the last request that answered it must know the transfer did not happen
    output, is_error = seen[-1]
    assert is_error and TRANSFER not in output, seen
