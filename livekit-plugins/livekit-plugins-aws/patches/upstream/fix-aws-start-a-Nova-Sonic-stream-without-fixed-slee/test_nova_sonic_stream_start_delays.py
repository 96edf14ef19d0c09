"""Nova Sonic: a stream starts on its events, not after fixed delays.

Every Nova Sonic stream (the first one and each recycle) slept 10 ms after each history event
and another 50 ms before the session was marked active; a recycle is on the conversation's
critical path, so a long history added up to a noticeable pause. The events need no delay: each
goes out once the one before it did, the audio input's ``contentStart`` goes out after the
history, and interactive text only after it.

Runs on upstream's virtual-time loop (``tests/virtual_time.py``): the delay is measured on the
loop's clock, with no real time passing.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from livekit.agents import function_tool, llm

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
    FakeBedrock,
    model_turn,
)


@function_tool
async def check_table(table: int) -> str:
    """Check a table."""
    return "free"


@pytest.mark.virtual_time
async def test_a_stream_with_history_starts_without_fixed_delays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer("and table 13?", model_turn("Also free."))
    history = llm.ChatContext.empty()
    for i in range(5):
        history.add_message(role="user", content=f"is table {i} free?")
        history.add_message(role="assistant", content="Yes.")
    loop = asyncio.get_running_loop()
    rt = RealtimeModel.with_nova_sonic_2().session()
    try:
        started_at = loop.time()
        await rt.update_instructions("You check tables.")
        await rt.update_tools([check_table])
        await rt.update_chat_ctx(history)
        stream = await bedrock.stream(0)
        waited = loop.time() - started_at
        assert waited < 0.01, f"the stream took {waited:.2f} s to start, in fixed delays"

        ctx = rt.chat_ctx.copy()
        ctx.add_message(role="user", content="and table 13?")
        await rt.update_chat_ctx(ctx)
        await bedrock.wait_for(lambda: ("USER", True, "and table 13?") in stream.texts(), "text")
        # the history, then the audio input, then the typed turn
        blocks = [
            "AUDIO" if b["type"] == "AUDIO" else ("typed" if b.get("interactive") else "history")
            for b in stream._blocks.values()
        ]
        assert blocks == ["history"] * 11 + ["AUDIO", "typed"], blocks
    finally:
        await rt.aclose()
