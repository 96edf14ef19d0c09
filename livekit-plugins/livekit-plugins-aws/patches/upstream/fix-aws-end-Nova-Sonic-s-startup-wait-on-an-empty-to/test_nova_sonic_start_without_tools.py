"""Nova Sonic: a session given an empty tool list starts its stream at once.

Before it starts its first stream, ``RealtimeSession.initialize_streams()`` waits up to 500 ms
for the first tool list, instructions and chat context. The framework gives an agent without
tools an empty list, and that list must end the wait like any other: before the fix only a
non-empty list did, so every session of an agent without tools started 500 ms late.

Runs on upstream's virtual-time loop (``tests/virtual_time.py``): the wait is measured on the
loop's clock, with no real time passing.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from livekit.agents import Agent

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
    model_turn,
    offline_session,
)


class Host(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a host.")


@pytest.mark.virtual_time
async def test_an_agent_without_tools_starts_its_stream_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer("hi", model_turn("Hello there."))
    loop = asyncio.get_running_loop()
    async with offline_session() as session:
        started_at = loop.time()
        await session.start(Host())
        stream = await bedrock.stream(0)
        waited = loop.time() - started_at

        assert waited < 0.5, f"the stream started {waited:.2f} s late, waiting for a tool list"
        # the session works as before
        await asyncio.wait_for(session.run(user_input="hi"), TIMEOUT)
        assert ("USER", True, "hi") in stream.texts()
