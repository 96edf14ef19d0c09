"""Nova Sonic: ``update_options()`` warns about a tool choice only when one is asked for.

The framework passes its tool choice to ``RealtimeSession.update_options()`` on every option
update (``None`` when the agent set none), and around a reply to an async tool's result it sets
``"none"`` and resets it afterwards. Nova Sonic takes the tool choice only when a stream starts,
so a choice other than the stream's deserves a warning, but a call that asks for nothing (no
value, ``None``, or ``"auto"`` on a stream opened with none) must not log one: a warning on every
turn hides the one time it matters.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from livekit.agents import NOT_GIVEN, llm

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
    FakeBedrock,
)

UNSUPPORTED = "updating inference configuration options is not yet supported"


async def _started_session(bedrock: FakeBedrock) -> RealtimeSession:
    """A Nova Sonic 2 session set up as the framework does, its stream up."""
    rt = RealtimeModel.with_nova_sonic_2().session()
    await rt.update_instructions("You book tables.")
    await rt.update_tools([])
    await rt.update_chat_ctx(llm.ChatContext.empty())
    await bedrock.stream(0)
    return rt


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and UNSUPPORTED in r.getMessage()
    ]


@pytest.mark.parametrize(
    "tool_choice", [NOT_GIVEN, None, "auto"], ids=["not-given", "none-value", "auto"]
)
async def test_no_tool_choice_asked_no_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tool_choice: Any
) -> None:
    rt = await _started_session(FakeBedrock(monkeypatch))
    try:
        with caplog.at_level(logging.WARNING, logger="livekit.plugins.aws"):
            rt.update_options(tool_choice=tool_choice)
        assert _warnings(caplog) == [], f"update_options(tool_choice={tool_choice!r}) warned"
    finally:
        await rt.aclose()


async def test_a_tool_choice_asked_for_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rt = await _started_session(FakeBedrock(monkeypatch))
    try:
        with caplog.at_level(logging.WARNING, logger="livekit.plugins.aws"):
            for _ in range(3):  # as the framework asks around every reply to a tool's update
                rt.update_options(tool_choice="none")
                rt.update_options(tool_choice=None)
        assert len(_warnings(caplog)) == 1, _warnings(caplog)
    finally:
        await rt.aclose()
