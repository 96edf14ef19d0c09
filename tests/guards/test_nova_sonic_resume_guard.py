"""Guard: Nova Sonic's ``manual_function_calls`` capability says what it does.

The framework reads ``manual_function_calls`` to know whether a realtime model can take the
result of a call from chat context: it logs ERROR "does not support resuming function calls"
when a tool awaits an ``AgentTask`` on a model that declares it cannot. Here a Nova Sonic tool
awaits a task, so the agent resumes on a new Bedrock stream, and the test pins the flag to what
happens there: the result reaches the model (and the framework logs no such ERROR) exactly when
the model declares ``manual_function_calls=True``. Holds on stock 1.8.9 (False, dropped) and on
the fork (True for Nova Sonic 2, whose text input carries the result; False for Nova Sonic 1).

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentTask, function_tool, llm

from tests.fakes import ErrorLogCapture, MakeSession, bounded, wait_for_event
from tests.fakes.bedrock_stream import FakeBedrock, model_turn, offline_bedrock, sent_texts
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS

pytestmark = [*NOVA_SONIC_MARKS]

RESUME_ERROR = r"does not support resuming function calls"
# the framework's own wait for an automatic tool reply (5 s) must fit in the bound
BOUND = 8.0


class LookupTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="You look up records.")

    async def on_enter(self) -> None:
        self.complete("record 7")


class Desk(Agent):
    def __init__(self, model: Any) -> None:
        super().__init__(instructions="be brief", llm=model)

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        return f"found {await LookupTask()}"


def _model(name: str) -> Any:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    return RealtimeModel.with_nova_sonic_1() if name == "sonic-1" else RealtimeModel.with_nova_sonic_2()


@pytest.mark.parametrize("name", ["sonic-1", "sonic-2"])
async def test_manual_function_calls_matches_resumption(
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    make_session: MakeSession,
    error_logs: ErrorLogCapture,
) -> None:
    model = _model(name)
    declared = model.capabilities.manual_function_calls
    if not declared:
        error_logs.allow(RESUME_ERROR, expected=True)
    bedrock: FakeBedrock = offline_bedrock(monkeypatch)
    session = await make_session(Desk(model))
    first = await bedrock.connection(0)
    await first.wait_ready()

    # the point where the plugin has been given the tool's result
    from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession

    result_given = asyncio.Event()
    update_chat_ctx = RealtimeSession.update_chat_ctx

    async def _spy(self: RealtimeSession, chat_ctx: llm.ChatContext) -> None:
        await update_chat_ctx(self, chat_ctx)
        if any(i.type == "function_call_output" and i.call_id == "tool-1" for i in chat_ctx.items):
            result_given.set()

    monkeypatch.setattr(RealtimeSession, "update_chat_ctx", _spy)

    # the model calls the tool on its own (Nova Sonic 1 takes no typed turns)
    first.push(model_turn(tool=("tool-1", "look_up", {})))
    await bounded(result_given.wait(), BOUND, what="the tool's result to reach the plugin")
    resumed = await bedrock.connection(1)
    # (the plugin cannot close a stream still being set up: let it come up first)
    await resumed.wait_ready()
    if declared:
        answered = asyncio.ensure_future(
            wait_for_event(
                session,
                "conversation_item_added",
                lambda ev: getattr(ev.item, "role", None) == "assistant",
            )
        )
        await resumed.wait_sent(
            lambda e: "found record 7" in e["event"].get("textInput", {}).get("content", ""),
            what="the task's result",
        )
        resumed.push(model_turn("Your record is number 7."))
        await answered
    # (a model that cannot resume the call never answers it: the framework may wait 5 s)
    await bounded(session.wait_for_idle(), BOUND)

    delivered = any("found record 7" in text for _, _, text in sent_texts(resumed.sent))
    assert delivered == declared, f"manual_function_calls={declared}, result delivered: {delivered}"
    assert bedrock.violations == []
