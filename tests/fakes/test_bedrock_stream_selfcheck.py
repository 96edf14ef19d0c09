"""Self-checks of the Bedrock bidirectional stream fake (``tests.fakes.bedrock_stream``).

The first tests drive the fake's client directly, the way the Nova Sonic plugin does; the last
one runs the plugin's own ``RealtimeSession`` against it."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from tests.fakes import BoundedWaitTimeout, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    event_kind,
    is_interactive_text,
    is_tool_result,
    model_turn,
    offline_bedrock,
    sent_texts,
    text_block,
    tool_result_contents,
    tool_use,
)

pytestmark = [
    pytest.mark.skipif(sys.version_info < (3, 12), reason="the Nova Sonic extra needs Python 3.12+"),
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]


def _chunk(event: dict[str, Any]) -> Any:
    from aws_sdk_bedrock_runtime.models import (
        BidirectionalInputPayloadPart,
        InvokeModelWithBidirectionalStreamInputChunk,
    )

    return InvokeModelWithBidirectionalStreamInputChunk(
        value=BidirectionalInputPayloadPart(bytes_=json.dumps(event).encode("utf-8"))
    )


async def _open(bedrock: FakeBedrock) -> Any:
    """A stream opened the way the plugin opens one: client, invoke, await_output."""
    from aws_sdk_bedrock_runtime.client import InvokeModelWithBidirectionalStreamOperationInput
    from livekit.plugins.aws.experimental.realtime import RealtimeModel
    from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession

    session: Any = type("Holder", (), {})()  # only receives the client
    await RealtimeSession._initialize_client(session)  # type: ignore[arg-type]
    return await session._bedrock_client.invoke_model_with_bidirectional_stream(
        InvokeModelWithBidirectionalStreamOperationInput(model_id=RealtimeModel.with_nova_sonic_2().model)
    )


def _tool_block(name: str, tool_use_id: str) -> list[dict[str, Any]]:
    cfg = {"toolUseId": tool_use_id, "type": "TEXT", "textInputConfiguration": {"mediaType": "text/plain"}}
    return [
        {
            "event": {
                "contentStart": {
                    "promptName": "p",
                    "contentName": name,
                    "type": "TOOL",
                    "role": "TOOL",
                    "toolResultInputConfiguration": cfg,
                }
            }
        },
        {"event": {"toolResult": {"promptName": "p", "contentName": name, "content": "{}"}}},
        {"event": {"contentEnd": {"promptName": "p", "contentName": name}}},
    ]


async def test_journals_sends_and_delivers_pushed_events(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = offline_bedrock(monkeypatch)
    stream = await _open(bedrock)
    conn = await bedrock.connection(0)
    assert conn.model_id == "amazon.nova-2-sonic-v1:0"
    assert stream.output_stream is None  # like the SDK, until the initial response

    await stream.input_stream.send(_chunk({"event": {"sessionStart": {}}}))
    assert [event_kind(e) for e in conn.sent] == ["sessionStart"]

    _, output = await stream.await_output()
    assert stream.output_stream is output
    conn.push(text_block("ASSISTANT", "hello", stage="SPECULATIVE"))
    received = [json.loads((await bounded(output.receive())).value.bytes_) for _ in range(3)]
    assert [event_kind(e) for e in received] == ["contentStart", "textOutput", "contentEnd"]
    assert received[1]["event"]["textOutput"]["content"] == "hello"
    assert "SPECULATIVE" in received[0]["event"]["contentStart"]["additionalModelFields"]

    await stream.input_stream.close()
    assert stream.input_stream.closed and conn.closed
    assert await bounded(output.receive()) is None  # the service ends its output too
    assert conn.violations == []


async def test_records_violations(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = offline_bedrock(monkeypatch)
    stream = await _open(bedrock)
    conn = await bedrock.connection(0)
    conn.push(tool_use("t-1", "lookup", {"q": "x"}))
    assert conn.issued_tool_ids == {"t-1"}

    for event in [*_tool_block("a", "t-1"), *_tool_block("b", "t-1"), *_tool_block("c", "t-9")]:
        await stream.input_stream.send(_chunk(event))
    assert tool_result_contents(conn.sent) == [("t-1", "{}"), ("t-1", "{}"), ("t-9", "{}")]
    assert conn.answered_tool_ids == ["t-1", "t-1", "t-9"]
    assert len(conn.violations) == 2
    assert "second toolResult for 't-1'" in conn.violations[0]
    assert "'t-9', which it never issued" in conn.violations[1]

    await stream.input_stream.send(_chunk({"event": {"sessionEnd": {}}}))
    await stream.input_stream.send(_chunk({"event": {"promptEnd": {"promptName": "p"}}}))
    assert conn.sent_after_close and "promptEnd sent on a closed stream" in conn.violations[-1]
    assert bedrock.violations == conn.violations


async def test_reply_when_and_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = offline_bedrock(monkeypatch)
    bedrock.reply_when(is_interactive_text("hi"), model_turn("Hello.", completion_id="c1"))
    bedrock.reply_when(is_tool_result("t-1"), lambda conn, sent: [{"event": {"completionStart": {}}}])
    gate = bedrock.hold(0)
    stream = await _open(bedrock)
    conn = await bedrock.connection(0)

    waiter = asyncio.ensure_future(stream.await_output())
    await gate.reached()
    assert not waiter.done() and not conn.output_awaited
    gate.open()
    _, output = await bounded(waiter)

    def text(name: str, content: str, interactive: bool) -> list[dict[str, Any]]:
        return [
            {
                "event": {
                    "contentStart": {
                        "promptName": "p",
                        "contentName": name,
                        "type": "TEXT",
                        "interactive": interactive,
                        "role": "USER",
                        "textInputConfiguration": {"mediaType": "text/plain"},
                    }
                }
            },
            {"event": {"textInput": {"promptName": "p", "contentName": name, "content": content}}},
            {"event": {"contentEnd": {"promptName": "p", "contentName": name}}},
        ]

    for event in [*text("h", "hi", False), *text("i", "hi", True), *text("j", "hi", True)]:
        await stream.input_stream.send(_chunk(event))
    assert sent_texts(conn.sent) == [("USER", False, "hi"), ("USER", True, "hi"), ("USER", True, "hi")]
    # one reply, to the first interactive block only (non-interactive history does not prompt)
    turn = conn.pushed
    assert [event_kind(e) for e in turn][0] == "completionStart" and event_kind(turn[-1]) == "completionEnd"
    assert len([e for e in turn if event_kind(e) == "completionStart"]) == 1
    first = json.loads((await bounded(output.receive())).value.bytes_)
    assert first["event"]["completionStart"]["completionId"] == "c1"

    with pytest.raises(BoundedWaitTimeout, match="the tool result on connection 0"):
        await conn.wait_sent(is_tool_result("t-1"), timeout=0.05, what="the tool result")
    conn.push(tool_use("t-1", "lookup"))
    for event in _tool_block("k", "t-1"):
        await stream.input_stream.send(_chunk(event))
    await conn.wait_sent(is_tool_result("t-1"), what="the tool result")
    assert event_kind(conn.pushed[-1]) == "completionStart"
    assert conn.violations == []


async def test_plugin_session_runs_against_the_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    from livekit.agents import llm
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    bedrock = offline_bedrock(monkeypatch)
    session = RealtimeModel.with_nova_sonic_2().session()
    try:
        await session.update_instructions("be brief")
        await session.update_chat_ctx(llm.ChatContext.empty())
        conn = await bedrock.connection(0)
        await conn.wait_ready()
        kinds = [event_kind(e) for e in conn.sent]
        assert kinds[:2] == ["sessionStart", "promptStart"]
        assert sent_texts(conn.sent) == [("SYSTEM", False, "be brief")]
    finally:
        await bounded(session.aclose())
    await conn.wait_closed()
    assert [event_kind(e) for e in conn.sent][-3:] == ["contentEnd", "promptEnd", "sessionEnd"]
    assert conn.violations == []
