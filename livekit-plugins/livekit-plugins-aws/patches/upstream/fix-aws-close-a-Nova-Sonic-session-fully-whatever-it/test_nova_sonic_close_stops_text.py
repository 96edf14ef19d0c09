"""Nova Sonic: closing a session stops the text it is still sending.

User text (a typed turn, or text an agent adds with ``update_chat_ctx()``) goes out from its own
task, which waits for the stream and for the text block before it. A session closed while such
text is still on its way must stop it: before the fix ``RealtimeSession.aclose()`` neither
cancelled nor awaited those tasks, so the text went out after the session's prompt end, or its
task waited for good for a stream that never became ready, outliving the session.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from livekit.agents import llm

if sys.version_info < (3, 12):
    pytest.skip("the Nova Sonic realtime model needs Python 3.12+", allow_module_level=True)

from livekit.plugins.aws.experimental.realtime import (  # noqa: E402
    RealtimeModel,
)

pytestmark = [
    pytest.mark.unit,
    pytest.mark.no_concurrent,  # patches the plugin's module and class for the whole process
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]

from .fake_nova_sonic import (  # noqa: E402
    TIMEOUT,
    FakeBedrock,
)


def _interactive_text_start(event: dict[str, Any]) -> bool:
    body = event["event"].get("contentStart", {})
    return body.get("type") == "TEXT" and bool(body.get("interactive"))


async def test_close_stops_the_text_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = FakeBedrock(monkeypatch)
    rt = RealtimeModel.with_nova_sonic_2().session()
    await rt.update_instructions("You are a concierge.")
    await rt.update_tools([])
    await rt.update_chat_ctx(llm.ChatContext.empty())
    stream = await bedrock.stream(0)
    stream.hold = _interactive_text_start  # the user text's block start stays on the wire

    before = asyncio.all_tasks()
    ctx = rt.chat_ctx.copy()
    ctx.add_message(role="user", content="when do you open?")
    await rt.update_chat_ctx(ctx)
    text_tasks = [t for t in asyncio.all_tasks() - before if not t.done()]
    await asyncio.wait_for(stream.held.wait(), TIMEOUT)
    try:
        await asyncio.wait_for(rt.aclose(), TIMEOUT)
        assert stream.input_stream.closed
        left = [t for t in text_tasks if not t.done()]
        assert left == [], "the closed session's text is still on its way"
    finally:
        stream.release.set()  # a task left running goes on, on the closed stream
        for task in text_tasks:
            task.cancel()
        await asyncio.gather(*text_tasks, return_exceptions=True)
    assert stream.after_close == [], "text sent after the session closed"
