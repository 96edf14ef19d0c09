"""Nova Sonic: a tool result queued as the session closes goes out before its prompt end.

``update_chat_ctx()`` queues a tool result for the task that streams the audio input, which
sends it as the ``toolResult`` of its call. A session closed right after must send what is
queued before it ends the prompt: the result of a tool that handed off to another agent, or a
sibling call's, is otherwise lost, or goes out after ``promptEnd`` on a stream that ended.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

if sys.version_info < (3, 12):
    pytest.skip("the Nova Sonic realtime model needs Python 3.12+", allow_module_level=True)


pytestmark = [
    pytest.mark.unit,
    pytest.mark.no_concurrent,  # patches the plugin's module and class for the whole process
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]

from .fake_nova_sonic import (  # noqa: E402
    TIMEOUT,
    FakeBedrock,
    result_ctx,
    session_with_a_call,
)


async def test_a_queued_tool_result_goes_out_before_the_prompt_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    rt, stream = await session_with_a_call(bedrock, "call-7")

    await rt.update_chat_ctx(result_ctx(rt, "call-7"))  # queued for the audio input task
    await asyncio.wait_for(rt.aclose(), TIMEOUT)

    assert stream.after_close == [], f"sent after the stream closed: {stream.after_close}"
    assert [tool_id for tool_id, _ in stream.tool_results()] == ["call-7"], (
        "the queued tool result never went out"
    )
    kinds = stream.kinds()
    assert kinds.index("toolResult") < kinds.index("promptEnd"), (
        "the tool result went out after the prompt ended"
    )
