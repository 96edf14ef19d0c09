"""Nova Sonic: a closing session sends nothing after its stream's prompt ended.

Driven through the plugin's ``RealtimeSession`` (what ``AgentSession`` calls): the model calls a
tool, the result is given to the session with ``update_chat_ctx()``, and the session closes.

* Stock 1.8.9's ``RealtimeSession.aclose()`` sends the prompt end block while the audio input
  task, which sends the queued ``toolResult``s, still runs, and cancels that task after it: a
  result queued just before the close goes out after ``promptEnd``/``sessionEnd``, on the ended
  stream, or (when the task is cancelled first) not at all. It now goes out before them.
* The framework still gives a closing agent's session the results and input that arrive while
  it leaves. Stock's ``update_chat_ctx()`` on a closed session raises ``ChanClosed`` for a result
  of one of its calls (the tool results channel closed with the stream), which fails the
  framework's generation task. It now does nothing.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import llm

from tests.fakes import bounded
from tests.fakes.bedrock_stream import (
    BedrockConnection,
    FakeBedrock,
    event_kind,
    model_turn,
    tool_result_contents,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS

pytestmark = [*NOVA_SONIC_MARKS]


def _result_ctx(rt: Any, call_id: str) -> llm.ChatContext:
    ctx = rt.chat_ctx.copy()
    ctx.items.append(llm.FunctionCall(call_id=call_id, name="check_table", arguments="{}"))
    ctx.items.append(
        llm.FunctionCallOutput(call_id=call_id, name="check_table", output="free from 8pm", is_error=False)
    )
    return ctx


async def _session_with_a_call(bedrock: FakeBedrock, call_id: str) -> tuple[Any, BedrockConnection]:
    """A started Nova Sonic 2 session whose model called ``check_table`` (``call_id``)."""
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    rt = RealtimeModel.with_nova_sonic_2().session()
    created: asyncio.Future[llm.GenerationCreatedEvent] = asyncio.get_running_loop().create_future()
    rt.on("generation_created", lambda ev: created.done() or created.set_result(ev))
    await rt.update_instructions("be brief")
    await rt.update_tools([])
    await rt.update_chat_ctx(llm.ChatContext.empty())
    conn = await bedrock.connection(0)
    await conn.wait_ready()
    conn.push(model_turn(tool=(call_id, "check_table", {})))
    ev = await bounded(created, what="the generation of the tool call")
    calls = [call async for call in ev.function_stream]
    assert [c.call_id for c in calls] == [call_id]
    return rt, conn


@pytest.mark.upstream_bug(
    "not-yet: a closing Nova Sonic stream drops a queued tool result or sends it after its prompt end"
)
async def test_a_queued_tool_result_goes_out_before_the_prompt_end(bedrock: FakeBedrock) -> None:
    rt, conn = await _session_with_a_call(bedrock, "call-7")

    await rt.update_chat_ctx(_result_ctx(rt, "call-7"))  # queued for the audio input task
    await bounded(rt.aclose(), what="RealtimeSession.aclose")

    kinds = [event_kind(e) for e in conn.sent]
    assert conn.sent_after_close == [], f"sent after the prompt ended: {conn.sent_after_close}"
    assert tool_result_contents(conn.sent) == [("call-7", '{"tool_result": "free from 8pm"}')]
    assert kinds.index("toolResult") < kinds.index("promptEnd")


@pytest.mark.upstream_bug(
    "not-yet: a closed Nova Sonic session's update_chat_ctx raises or sends on the ended stream"
)
async def test_a_closed_session_takes_results_and_input_without_sending(bedrock: FakeBedrock) -> None:
    rt, conn = await _session_with_a_call(bedrock, "call-7")
    await bounded(rt.aclose(), what="RealtimeSession.aclose")
    sent = len(conn.sent)

    ctx = _result_ctx(rt, "call-7")
    ctx.add_message(role="user", content="and table 13?")
    raised: BaseException | None = None
    try:
        await rt.update_chat_ctx(ctx)
    except Exception as e:  # stock: ChanClosed
        raised = e
    pending = [t for t in asyncio.all_tasks() if t.get_name().startswith("RealtimeSession._send")]
    for task in pending:  # a stock text task would wait for good on the ended stream
        task.cancel()

    assert raised is None, f"update_chat_ctx() on the closed session raised {raised!r}"
    assert pending == [], "text still on its way to the closed stream"
    assert len(conn.sent) == sent and conn.sent_after_close == []
