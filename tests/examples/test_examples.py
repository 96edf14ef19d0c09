"""The examples run against the scripted model, so they cannot rot."""

from __future__ import annotations

import asyncio

from examples import deferred_handoff, parallel_handoff
from tests.fakes import LLMCall, Reply, ScriptedLLM, bounded, tool_call


async def test_parallel_handoff_example() -> None:
    def answer(call: LLMCall) -> str:
        return "Billing here: you prefer email." if "billing agent" in (call.instructions or "") else "..."

    fake = ScriptedLLM(
        [
            Reply(
                tool_calls=[
                    tool_call("save_note", {"note": "prefers email"}),
                    tool_call("transfer_to_billing"),
                ]
            )
        ],
        fallback=answer,
    )
    session = await bounded(
        parallel_handoff.run_demo(fake, ["note email, billing please", "what did you note?"])
    )
    assert type(session.current_agent).__name__ == "BillingAgent"
    billing_calls = [c for c in fake.calls if "billing agent" in (c.instructions or "")]
    assert [c.instructions for c in fake.calls].count(fake.calls[0].instructions) == 1
    outputs = [i.output for i in billing_calls[0].chat_ctx.items if i.type == "function_call_output"]
    assert "Saved: prefers email" in outputs


async def test_deferred_handoff_example() -> None:
    lookup: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("get_weather")])], fallback="One moment.")
    demo = asyncio.ensure_future(deferred_handoff.run_demo(fake, lookup))
    await fake.wait_for_calls(2)  # the tool call, then the reply to the progress update
    lookup.set_result("sunny, 21 degrees")
    session = await bounded(demo)
    assert type(session.current_agent).__name__ == "ForecastAgent"
