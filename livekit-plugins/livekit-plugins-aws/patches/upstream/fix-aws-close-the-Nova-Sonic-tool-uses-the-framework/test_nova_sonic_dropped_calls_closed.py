"""Nova Sonic: the output closing a call the framework dropped only answers the call's toolUse.

When the user interrupts a reply holding tool calls before they ran, the framework tells a
realtime model whose context cannot be edited that those calls were not run: it gives the
session each call, marked ``extra["__livekit_agents_tool_dropped"]``, with an error output that
asks for no reply. Nova Sonic keeps a ``toolUse`` open until it has a result, so the session
answers the call's ``toolUse`` with that error, and nothing more: it is the closing of a call,
not a tool result the user should hear about, so no "wants no reply" warning on every
barge-in. Any other error output that asks for no reply (a tool that failed) is still a result
the model must hear, and still warned about.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest

from livekit.agents import llm

if sys.version_info < (3, 12):
    pytest.skip("the Nova Sonic realtime model needs Python 3.12+", allow_module_level=True)


pytestmark = [
    pytest.mark.unit,
    pytest.mark.no_concurrent,  # patches the plugin's module and class for the whole process
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]

from .fake_nova_sonic import (  # noqa: E402
    FakeBedrock,
    session_with_a_call,
)

NO_REPLY = "a tool result wants no reply"


def _with_output(rt: Any, call_id: str, *, dropped: bool) -> llm.ChatContext:
    ctx = rt.chat_ctx.copy()
    extra = {"__livekit_agents_tool_dropped": True} if dropped else {}
    ctx.items.append(
        llm.FunctionCall(call_id=call_id, name="check_table", arguments="{}", extra=extra)
    )
    ctx.items.append(
        llm.FunctionCallOutput(
            call_id=call_id,
            name="check_table",
            output="the call was not run" if dropped else "the table service is down",
            is_error=True,
            reply_required=False,
        )
    )
    return ctx


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and NO_REPLY in r.getMessage()
    ]


async def test_a_dropped_call_is_closed_without_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    rt, stream = await session_with_a_call(bedrock, "call-7")
    try:
        with caplog.at_level(logging.WARNING, logger="livekit.plugins.aws"):
            await rt.update_chat_ctx(_with_output(rt, "call-7", dropped=True))
            await bedrock.flush_audio_input()  # the result, if queued, went out

        results = stream.tool_results()
        assert [tool_id for tool_id, _ in results] == ["call-7"], (
            "the dropped call's toolUse is open"
        )
        assert "error" in json.loads(results[0][1])
        assert _warnings(caplog) == [], "the closing of a dropped call was warned about"
    finally:
        await rt.aclose()


async def test_a_failed_tool_that_asks_for_no_reply_is_still_a_result(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    rt, stream = await session_with_a_call(bedrock, "call-8")
    try:
        with caplog.at_level(logging.WARNING, logger="livekit.plugins.aws"):
            await rt.update_chat_ctx(_with_output(rt, "call-8", dropped=False))
            await bedrock.flush_audio_input()

        assert [tool_id for tool_id, _ in stream.tool_results()] == ["call-8"]
        assert len(_warnings(caplog)) == 1
    finally:
        await rt.aclose()
