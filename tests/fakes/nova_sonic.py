"""Nova Sonic under a real ``AgentSession``, on the recording Bedrock fake
(:mod:`tests.fakes.bedrock_stream`, the ``bedrock`` fixture): what its tests share.

* :data:`NOVA_SONIC_MARKS`: the marks every such module starts its ``pytestmark`` with (the
  plugin's Nova Sonic extra needs Python 3.12+; botocore's ``utcnow`` warning);
* :func:`nova_sonic_2`: the plugin's ``RealtimeModel.with_nova_sonic_2()``, imported when called
  (the import itself needs Python 3.12+);
* :func:`nova_session`: a session started with an agent, and its first Bedrock connection once
  the plugin has set it up::

      pytestmark = [*NOVA_SONIC_MARKS, pytest.mark.upstream_bug("...")]

      session, conn = await nova_session(bedrock, make_session, Concierge())

* :func:`tool_output_taken`: resolves once the plugin's ``update_chat_ctx()`` took a tool's
  output (and lists what it raised), to place the output in a window the test holds open.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession

from .bedrock_stream import BedrockConnection, FakeBedrock
from .session import MakeSession

__all__ = ["NOVA_SONIC_MARKS", "nova_session", "nova_sonic_2", "tool_output_taken"]

NOVA_SONIC_MARKS = [
    pytest.mark.skipif(sys.version_info < (3, 12), reason="the Nova Sonic extra needs Python 3.12+"),
    pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning"),
]


def nova_sonic_2(**kwargs: Any) -> Any:
    """``RealtimeModel.with_nova_sonic_2(**kwargs)`` of the AWS plugin."""
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    return RealtimeModel.with_nova_sonic_2(**kwargs)


async def nova_session(
    bedrock: FakeBedrock, make_session: MakeSession, agent: Agent
) -> tuple[AgentSession[Any], BedrockConnection]:
    """Start a session with ``agent``; bounded: its first connection is ready (the plugin sent
    its session and prompt setup)."""
    session = await make_session(agent)
    conn = await bedrock.connection(0)
    await conn.wait_ready()
    return session, conn


def tool_output_taken(
    monkeypatch: pytest.MonkeyPatch, call_id: str = "tool-1"
) -> tuple[asyncio.Future[None], list[BaseException]]:
    """A future that resolves once ``RealtimeSession.update_chat_ctx()`` returned, or raised,
    with ``call_id``'s output, and the list of what it raised."""
    from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession

    taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    errors: list[BaseException] = []
    update = RealtimeSession.update_chat_ctx

    async def _watched(self: Any, chat_ctx: Any) -> None:
        has = any(i.type == "function_call_output" and i.call_id == call_id for i in chat_ctx.items)
        try:
            await update(self, chat_ctx)
        except Exception as e:
            errors.append(e)
            raise
        finally:
            if has and not taken.done():
                taken.set_result(None)

    monkeypatch.setattr(RealtimeSession, "update_chat_ctx", _watched)
    return taken, errors
