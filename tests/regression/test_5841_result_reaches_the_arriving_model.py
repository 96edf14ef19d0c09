"""livekit/agents#5841 (async tools): a result that comes back while its agent is handed off
reaches the model of the agent taking over, on every kind of model.

The front desk's ``check_order`` tool reports progress with ``ctx.update()`` and returns while
the application hands the caller to the billing desk (``session.update_agent()``), during the
front desk's ``on_exit()``. The result is recorded in the session's history, so the model of
the agent now in charge must have it: the billing desk answers it, and later turns build on it.

The reply to such a result goes to the arriving agent with the result in a context of its own
(``session.generate_reply(chat_ctx=...)``). A pipeline model generates from that context; a
realtime model takes no context for a reply, so on stock 1.8.9 (and with the front desk's own
tool, also before the hand-over of its results) the billing desk's realtime model answers a
prompt naming a call it never saw. A tool whose result needs no reply (it returns ``None``)
is not delivered at all: the result stays with the agent that left. The fork makes the
results part of the arriving agent's own context before it answers, for every model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import AgentSession, llm
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
    is_final,
    order_tool,
)

BUG = pytest.mark.upstream_bug("livekit/agents#5841")


def answer(instructions: str | None) -> str:
    return {FRONT: "Front desk here.", BILLING: "Billing here."}.get(instructions or "", "ok")


def make_model(kind: str) -> Any:
    script = [Reply(tool_calls=[tool_call("check_order", call_id=CALL_ID)])]
    if kind == "pipeline":
        return ScriptedLLM(script, fallback=lambda call: answer(call.instructions))
    return ScriptedRealtimeModel(
        script, fallback=lambda gen: answer(gen.instructions), reuse=kind == "realtime-reused"
    )


def billing_contexts(model: Any) -> list[llm.ChatContext]:
    """What the billing desk's model was given: each LLM request's context, or the context of
    its realtime session as the model holds it now."""
    if isinstance(model, ScriptedLLM):
        return [c.chat_ctx for c in model.calls if c.instructions == BILLING]
    return [s.chat_ctx for s in model.sessions if s.instructions == BILLING]


def has_final(ctx: llm.ChatContext) -> bool:
    return any(i.type == "function_call_output" and i.call_id == FINAL_ID for i in ctx.items)


def front_requests_after(model: Any, start: int) -> list[Any]:
    if isinstance(model, ScriptedLLM):
        return [c for c in model.calls[start:] if c.instructions == FRONT]
    return [g for g in model.generations[start:] if g.instructions == FRONT]


def n_requests(model: Any) -> int:
    return len(model.calls) if isinstance(model, ScriptedLLM) else len(model.generations)


KINDS = ["pipeline", "realtime-reused", "realtime-replaced"]
CASES = [
    # (model kind, the tool's scope, its result)
    *(
        pytest.param(kind, scope, SHIPPED, id=f"{kind}-{scope.split('_')[0]}-answered")
        for kind in KINDS
        for scope in ("session_toolset", "agent_toolset")
    ),
    *(pytest.param(kind, "agent_toolset", None, id=f"{kind}-agent-no-reply") for kind in KINDS),
]


@BUG
@pytest.mark.parametrize(("kind", "scope", "result"), CASES)
async def test_the_arriving_agent_s_model_gets_the_result(
    make_session: MakeSession, kind: str, scope: str, result: str | None
) -> None:
    journal = OrderJournal()
    toolset = AsyncToolset(id="orders", tools=[order_tool(journal, result)])
    front = Front(journal, [toolset] if scope == "agent_toolset" else [])
    kwargs: dict[str, Any] = {"tools": [toolset]} if scope == "session_toolset" else {}
    model = make_model(kind)
    session: AgentSession[Any] = await make_session(front, llm=model, **kwargs)

    await bounded(session.run(user_input="Where is my order?"), what="order turn")
    await journal.tool_gate.reached()

    billing = Billing(journal)
    session.update_agent(billing)
    await bounded(journal.exiting["front"].wait(), what="front desk on_exit")
    at_exit = n_requests(model)

    # the tool returns while the front desk is in its on_exit
    ended = asyncio.ensure_future(wait_for_event(session, "tool_execution_updated", is_final))
    journal.tool_gate.open()
    assert (await bounded(ended, what="check_order ended")).update.status == "done"
    journal.exit_gates["front"].open()
    await bounded(journal.entered["billing"].wait(), what="billing desk on_enter")
    await bounded(session.run(user_input="Thanks."), what="next turn")
    await bounded(session.wait_for_idle(), what="idle")
    # a result that needs no reply reaches the model with the billing desk's next request
    await bounded(session.run(user_input="Bye."), what="last turn")

    assert session.current_agent is billing
    outputs = [i for i in session.history.items if i.type == "function_call_output" and i.call_id == FINAL_ID]
    assert len(outputs) == 1 and outputs[0].output == (result or "")
    # the billing desk's model has the result, whether it was answered or not
    contexts = billing_contexts(model)
    assert contexts and has_final(contexts[-1]), [[i.type for i in c.items] for c in contexts]
    assert has_final(billing.chat_ctx)
    # and the front desk asked nothing once its on_exit started
    assert front_requests_after(model, at_exit) == []
    await bounded(session.aclose(), what="AgentSession.aclose")
