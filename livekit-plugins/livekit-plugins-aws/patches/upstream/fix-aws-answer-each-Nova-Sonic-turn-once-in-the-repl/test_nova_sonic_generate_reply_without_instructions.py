"""Nova Sonic: ``generate_reply()`` without instructions gets a reply, or fails in time.

An agent that asks for a reply without instructions (a greeting from its ``on_enter`` with
``self.session.generate_reply()``) must get one: Nova Sonic generates only in answer to
interactive input, so the session has to prompt the model, with text that is not the user's
words. And when the model stays silent the reply must fail after ``generate_reply_timeout``,
as a reply with instructions does. Before the fix the session returned a future that nothing
ever resolved or failed: the greeting's speech never ended and every turn after it waited.
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
from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession  # noqa: E402

pytestmark = [
    pytest.mark.unit,
    pytest.mark.no_concurrent,  # patches the plugin's module and class for the whole process
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]

from .fake_nova_sonic import (  # noqa: E402
    TIMEOUT,
    FakeBedrock,
    FakeStream,
    model_turn,
)


async def _started_session(
    bedrock: FakeBedrock, **model_options: Any
) -> tuple[RealtimeSession, FakeStream]:
    """A Nova Sonic 2 session set up as the framework does, its stream up."""
    rt = RealtimeModel.with_nova_sonic_2(**model_options).session()
    await rt.update_instructions("You greet guests.")
    await rt.update_tools([])
    await rt.update_chat_ctx(llm.ChatContext.empty())
    return rt, await bedrock.stream(0)


async def test_generate_reply_without_instructions_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer("", model_turn("Welcome!"))  # the model answers any interactive input
    rt, stream = await _started_session(bedrock)
    try:
        reply = rt.generate_reply()
        await asyncio.wait([reply], timeout=TIMEOUT)
        assert reply.done(), "generate_reply() without instructions got no reply"
        assert isinstance(reply.result(), llm.GenerationCreatedEvent)
        prompts = [text for role, interactive, text in stream.texts() if interactive]
        assert len(prompts) == 1, f"the model was prompted {len(prompts)} times"
    finally:
        await rt.aclose()


async def test_generate_reply_without_instructions_fails_when_the_model_is_silent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bedrock = FakeBedrock(monkeypatch)
    rt, _ = await _started_session(bedrock, generate_reply_timeout=0.5)
    try:
        reply = rt.generate_reply()
        await asyncio.wait([reply], timeout=TIMEOUT)
        assert reply.done(), "generate_reply() neither got a reply nor failed"
        assert isinstance(reply.exception(), llm.RealtimeError)
    finally:
        reply.cancel()
        await rt.aclose()
