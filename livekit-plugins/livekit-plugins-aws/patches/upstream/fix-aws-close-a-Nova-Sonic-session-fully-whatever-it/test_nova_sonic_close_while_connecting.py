"""Nova Sonic: a session closed while it is still connecting closes its stream.

A Nova Sonic session opens its Bedrock stream, then waits for its setup (tools, instructions,
chat context) before it starts the session on it. A session closed in that window (an agent
handed over at once, an ``AgentTask`` that completes in its ``on_enter``) must close that stream
and send nothing on it: before the fix ``RealtimeSession.aclose()`` only closed an active
session's stream, so the stream stayed open, one per such agent, for the whole call.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

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


async def test_a_session_closed_while_connecting_closes_its_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    before = asyncio.all_tasks()
    rt = RealtimeModel.with_nova_sonic_2().session()
    try:
        await bedrock.wait_for(lambda: bedrock.streams, "the stream to open")
        stream = bedrock.streams[0]  # opened; the session waits for its setup
        await asyncio.wait_for(rt.aclose(), TIMEOUT)

        assert stream.input_stream.closed, "the stream of a session closed while connecting is open"
        assert stream.sent == [] and stream.after_close == []
    finally:
        # before the fix the session's setup went on after its close
        left = [
            t
            for t in asyncio.all_tasks() - before
            if t.get_name().startswith("RealtimeSession.") and not t.done()
        ]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
