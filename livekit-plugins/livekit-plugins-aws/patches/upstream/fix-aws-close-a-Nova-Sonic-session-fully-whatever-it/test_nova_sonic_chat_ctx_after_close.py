"""Nova Sonic: a closed session takes a chat context without raising or sending anything.

The framework can give a realtime session a chat context after the session closed (a tool that
finished while its agent was handed off, user input arriving as the session closes). A closed
Nova Sonic session must return without raising and send nothing on the stream it ended: no
tool result on its closed channel (``ChanClosed``), no text task left waiting for a stream that
never comes back.
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


async def test_a_closed_session_takes_results_and_input_without_sending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    rt, stream = await session_with_a_call(bedrock, "call-7")
    await asyncio.wait_for(rt.aclose(), TIMEOUT)
    sent = len(stream.sent)

    ctx = result_ctx(rt, "call-7")
    ctx.add_message(role="user", content="and table 13?")
    raised: BaseException | None = None
    try:
        await rt.update_chat_ctx(ctx)
    except Exception as e:
        raised = e
    pending = [t for t in asyncio.all_tasks() if t.get_name().startswith("RealtimeSession._send")]
    for task in pending:  # a text task would wait for good for the ended stream
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)

    assert raised is None, f"update_chat_ctx() on the closed session raised {raised!r}"
    assert pending == [], "text still on its way to the closed stream"
    assert len(stream.sent) == sent and stream.after_close == [], "sent on the closed stream"
