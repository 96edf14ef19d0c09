"""livekit/agents#5841 (async tools): a reply to an async tool's result that was queued, but
had not started, when its agent started leaving is the arriving agent's.

The front desk's model calls ``check_order`` (an async tool: it reports progress with
``ctx.update()``) and ``transfer`` (returns the billing desk) in one turn. ``check_order`` returns
while ``transfer`` still runs: the front desk looks idle, so the result's reply is scheduled on
it, and waits out ``min_consecutive_speech_delay`` in the queue. ``transfer`` then returns the
billing desk, and the framework hands off (``update_agent()``). On stock 1.8.9 the drain plays
what is queued once the front desk's ``on_exit()`` ran, so the front desk starts answering the
result after its ``on_exit()`` (a realtime model is asked then, with the handoff in its
context), and the billing desk never answers it. Nothing of that reply had been said: the fork
hands its result to the billing desk, which answers it, whatever the tool's scope.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession, function_tool, llm
from livekit.agents.llm.async_toolset import AsyncToolset

from tests.fakes import (
    MakeSession,
    Reply,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    tool_call,
    wait_for_event,
)
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

# long enough for the handoff to begin while the reply waits in the queue: the transfer returns
# a few event loop steps after the test opens its gate
SPEECH_DELAY = 0.5


def answer(instructions: str | None) -> str:
    return {FRONT: "Front desk here.", BILLING: "Billing here."}.get(instructions or "", "ok")


def make_model(kind: str) -> Any:
    script = [
        Reply(
            tool_calls=[
                tool_call("check_order", call_id=CALL_ID),
                tool_call("transfer", call_id="call_transfer"),
            ]
        )
    ]
    if kind == "pipeline":
        return ScriptedLLM(script, fallback=lambda call: answer(call.instructions))
    return ScriptedRealtimeModel(
        script, fallback=lambda gen: answer(gen.instructions), reuse=kind == "realtime-reused"
    )


def n_requests(model: Any) -> int:
    return len(model.calls) if isinstance(model, ScriptedLLM) else len(model.generations)


def front_replies_to_the_result(model: ScriptedRealtimeModel, start: int) -> list[Any]:
    """The front desk's realtime generations from ``start`` on asked to answer the result (the
    async reply's instructions name the calls it answers)."""
    return [
        g
        for g in model.generations[start:]
        if g.instructions == FRONT and FINAL_ID in (g.extra_instructions or "")
    ]


def billing_contexts(model: Any) -> list[llm.ChatContext]:
    if isinstance(model, ScriptedLLM):
        return [c.chat_ctx for c in model.calls if c.instructions == BILLING]
    return [s.chat_ctx for s in model.sessions if s.instructions == BILLING]


def is_reply(status: str) -> Any:
    def check(ev: Any) -> bool:
        return (
            ev.update.type == "tool_reply_updated"
            and ev.update.status == status
            and FINAL_ID in ev.update.update_ids
        )

    return check


def said(session: AgentSession[Any]) -> list[str]:
    return [
        i.text_content or "" for i in session.history.items if i.type == "message" and i.role == "assistant"
    ]


@BUG
@pytest.mark.parametrize("scope", ["session_toolset", "agent_toolset"])
@pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced"])
async def test_a_queued_reply_to_a_result_goes_to_the_arriving_agent(
    make_session: MakeSession, kind: str, scope: str
) -> None:
    journal = OrderJournal()
    transfer_gate = Gate("transfer")
    billing = Billing(journal)

    @function_tool(name="transfer")
    async def transfer() -> Any:
        """Put the caller through to billing."""
        await transfer_gate.wait()
        return billing

    toolset = AsyncToolset(id="orders", tools=[order_tool(journal)])
    front = Front(journal, [transfer, *([toolset] if scope == "agent_toolset" else [])])
    kwargs: dict[str, Any] = {"tools": [toolset]} if scope == "session_toolset" else {}
    model = make_model(kind)
    session: AgentSession[Any] = await make_session(
        front, llm=model, min_consecutive_speech_delay=SPEECH_DELAY, **kwargs
    )

    reply_statuses: dict[str, list[str]] = {}

    @session.on("tool_execution_updated")
    def _on_update(ev: Any) -> None:
        if ev.update.type == "tool_reply_updated" and FINAL_ID in ev.update.update_ids:
            reply_statuses.setdefault(ev.update.speech_id, []).append(ev.update.status)

    run = asyncio.ensure_future(session.run(user_input="Where is my order? Then billing, please."))
    await journal.tool_gate.reached()
    await transfer_gate.reached()

    # check_order returns while transfer runs: its reply is queued on the idle front desk
    scheduled = asyncio.ensure_future(
        wait_for_event(session, "tool_execution_updated", is_reply("scheduled"))
    )
    journal.tool_gate.open()
    await bounded(scheduled, what="the reply to the order result scheduled")

    # transfer returns the billing desk while that reply waits in the queue
    completed = asyncio.ensure_future(
        wait_for_event(session, "tool_execution_updated", is_reply("completed"))
    )
    transfer_gate.open()
    await bounded(journal.exiting["front"].wait(), what="front desk on_exit")
    at_exit = n_requests(model)
    journal.exit_gates["front"].open()
    await bounded(journal.entered["billing"].wait(), what="billing desk on_enter")
    await bounded(completed, what="the reply to the order result")
    await bounded(run, what="the order turn")
    await bounded(session.wait_for_idle(), what="idle")

    assert session.current_agent is billing
    outputs = [i for i in session.history.items if i.type == "function_call_output" and i.call_id == FINAL_ID]
    assert len(outputs) == 1 and outputs[0].output == SHIPPED
    # the front desk answered its own batch (the one that hands off) only: a realtime front
    # desk was not asked to answer the result once its on_exit started (a pipeline reply's
    # request starts as it is queued, its playout waits its turn)
    assert said(session) == ["Front desk here.", "Billing here."], said(session)
    if isinstance(model, ScriptedRealtimeModel):
        assert front_replies_to_the_result(model, at_exit) == []
    # the billing desk answered the result, with it in its model's context
    contexts = billing_contexts(model)
    assert contexts and any(
        i.type == "function_call_output" and i.call_id == FINAL_ID for i in contexts[-1].items
    ), [[i.type for i in c.items] for c in contexts]
    await bounded(session.aclose(), what="AgentSession.aclose")
    # every reply scheduled for the result ended with a status of its own (the one handed over,
    # interrupted before anything was said; the arriving agent's, completed)
    assert all(
        len(statuses) == 2 and statuses[0] == "scheduled" and statuses[1] in ("interrupted", "completed")
        for statuses in reply_statuses.values()
    ), reply_statuses
    assert "completed" in [statuses[-1] for statuses in reply_statuses.values()], reply_statuses
