"""Nova Sonic: an ``AgentTask`` awaited inside a tool returns its result to the model.

Awaiting an ``AgentTask`` in a tool pauses the calling agent, which closes its realtime
session while the model's call is still open; the agent resumes on a new Bedrock stream once
the task completes. On stock 1.8.9 the new stream's ``_pending_tools`` does not know the call,
so ``RealtimeSession.update_chat_ctx()`` drops its result without a log; the framework logs
ERROR "does not support resuming function calls" (the plugin declares
``manual_function_calls=False``), waits 5 s for a reply that never comes, and the model never
hears the result. Nova Sonic 2 now gets the result on the new stream as interactive text marked
as a tool result (never a toolResult for an id that stream did not issue) and answers it.

Offline: ``tests.fakes.bedrock_stream`` stands in for the Bedrock stream under the plugin's
own session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentTask, RunResult, function_tool, llm

from tests.fakes import MakeSession, bounded
from tests.fakes.bedrock_stream import (
    FakeBedrock,
    is_interactive_text,
    model_turn,
    sent_texts,
    tool_result_contents,
)
from tests.fakes.nova_sonic import NOVA_SONIC_MARKS, nova_session, nova_sonic_2

pytestmark = [
    *NOVA_SONIC_MARKS,
    pytest.mark.upstream_bug("not-yet: Nova Sonic drops the result of a tool that awaited an AgentTask"),
]

QUESTION = "look up my record"
ANSWER = "Your record is number 7."
MARK = "This is a tool result, not the user speaking."
# the framework's own wait for an automatic tool reply (5 s) must fit in the bound
RUN_BOUND = 8.0


class LookupTask(AgentTask[str]):
    """Already knows its answer: completes in its on_enter."""

    def __init__(self) -> None:
        super().__init__(instructions="You look up records.")

    async def on_enter(self) -> None:
        self.complete("record 7")


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="be brief", llm=nova_sonic_2())

    @function_tool
    async def look_up(self) -> str:
        """Look up the caller's record."""
        return f"found {await LookupTask()}"


def _spy_results(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set once the plugin has been given the tool's result (``update_chat_ctx`` returned)."""
    from livekit.plugins.aws.experimental.realtime.realtime_model import RealtimeSession

    given = asyncio.Event()
    update_chat_ctx = RealtimeSession.update_chat_ctx

    async def _spy(self: RealtimeSession, chat_ctx: llm.ChatContext) -> None:
        await update_chat_ctx(self, chat_ctx)
        if any(i.type == "function_call_output" and i.call_id == "tool-1" for i in chat_ctx.items):
            given.set()

    monkeypatch.setattr(RealtimeSession, "update_chat_ctx", _spy)
    return given


def _run_items(result: RunResult[Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for ev in result.events:
        if ev.type == "message":
            out.append(("message", ev.item.text_content or ""))
        elif ev.type == "function_call_output":
            out.append(("function_call_output", ev.item.output))
    return out


async def test_task_result_reaches_the_resumed_agent(
    bedrock: FakeBedrock, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    bedrock.reply_when(is_interactive_text(QUESTION), model_turn(tool=("tool-1", "look_up", {})))
    # the model answers the next prompt it gets: on the agent's new stream, the result
    bedrock.reply_when(is_interactive_text(), model_turn(ANSWER))
    result_given = _spy_results(monkeypatch)
    session, _ = await nova_session(bedrock, make_session, Desk())

    result = await bounded(session.run(user_input=QUESTION), RUN_BOUND)
    await bounded(result_given.wait(), what="the tool's result to reach the plugin")
    first, resumed = await bedrock.connection(0), await bedrock.connection(1)
    await resumed.wait_ready()
    await bounded(session.wait_for_idle(), RUN_BOUND)

    results = [t for _, interactive, t in sent_texts(resumed.sent) if interactive and MARK in t]
    assert len(results) == 1 and results[0].endswith("found record 7"), (
        f"the task's result never reached the model: {sent_texts(resumed.sent)}"
    )
    assert _run_items(result) == [("function_call_output", "found record 7"), ("message", ANSWER)]
    assert session.history.messages()[-1].text_content == ANSWER
    # no toolResult for the call on either stream: the first closed with the call open,
    # the new one never issued it
    assert tool_result_contents(first.sent) == [] and tool_result_contents(resumed.sent) == []
    assert first.closed
    assert bedrock.violations == []
