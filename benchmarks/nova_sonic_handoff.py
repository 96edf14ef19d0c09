"""Nova Sonic handoff: time from the handing-off tool's return to the arriving agent's first
generation request on its new Bedrock connection, with a 50-item history.

Both agents run on Nova Sonic 2 against the recording fake of the Bedrock stream
(``tests/fakes/bedrock_stream.py``), which answers at once: whatever the figure holds beyond
the framework's own work is the plugin waiting. The arriving agent carries the conversation on
(it is built with the leaving agent's chat context) and greets from its ``on_enter`` with
``generate_reply(instructions=...)``, which goes out as interactive text: the request measured.

Stock spends fixed sleeps on this path in ``RealtimeSession.initialize_streams()``: 0.5 s
waiting for tools an agent without tools never gets, 0.01 s after each history event it sends
(three per message, the history truncated to 40 messages) and 0.05 s before it marks the
session active, about 1.75 s in all. Goal: the fork's figure is set by the fake's latencies
(none) and the framework's work, not by sleeps: at most 0.05 s (about 0.011 s with the sleeps
stubbed out). aws 0013 and 0014 drop those sleeps (fork 0.006 s, stock 1.79 s when written).
Run: `uv run python -m benchmarks.nova_sonic_handoff`.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, function_tool, llm

from tests.fakes import offline_session_kwargs
from tests.fakes.bedrock_stream import (
    BedrockConnection,
    FakeBedrock,
    SentEvent,
    ServerEvent,
    is_interactive_text,
    model_turn,
    offline_bedrock,
)

ROUNDS = 3
HISTORY_ITEMS = 50
GREET = "Greet the caller and say you took over."
GOALS = {"tool_return_to_first_request_s": "fork <= 0.050 (no fixed sleeps), stock ~1.75 of sleeps"}


def _nova() -> llm.RealtimeModel:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    return RealtimeModel.with_nova_sonic_2()


def _history() -> llm.ChatContext:
    ctx = llm.ChatContext.empty()
    for i in range(HISTORY_ITEMS // 2):
        ctx.add_message(role="user", content=f"question {i}")
        ctx.add_message(role="assistant", content=f"answer {i}")
    return ctx


class Arriving(Agent):
    """No tools of its own; greets on entering, carrying the conversation on."""

    def __init__(self, chat_ctx: llm.ChatContext) -> None:
        super().__init__(instructions="You take over.", llm=_nova(), chat_ctx=chat_ctx)

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions=GREET)


class Leaving(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You hand over.", llm=_nova(), chat_ctx=_history())
        self.returned_at = 0.0

    @function_tool
    async def transfer(self) -> tuple[Agent, str]:
        """Transfer the caller."""
        agent = Arriving(self.chat_ctx)
        self.returned_at = time.perf_counter()
        return agent, "Transferring you."


async def one(bedrock: FakeBedrock) -> float:
    requested = asyncio.get_running_loop().create_future()

    def _greet(conn: BedrockConnection, sent: SentEvent) -> list[ServerEvent]:
        if not requested.done():
            requested.set_result((conn.index, time.perf_counter()))
        return model_turn("Hello, I took over.")

    bedrock.reply_when(is_interactive_text("transfer me"), model_turn(tool=("tool-1", "transfer", {})))
    bedrock.reply_when(is_interactive_text(GREET), _greet)
    first_conn = len(bedrock.connections)
    leaving = Leaving()
    session: AgentSession[Any] = AgentSession(**offline_session_kwargs())
    await session.start(leaving, record=False)
    try:
        await (await bedrock.connection(first_conn)).wait_ready(timeout=10)
        session.generate_reply(user_input="transfer me")
        try:
            conn_index, at = await asyncio.wait_for(requested, 10)
        except asyncio.TimeoutError:
            return float("inf")
        assert conn_index > first_conn, "the greeting went out on the leaving agent's connection"
        return float(at - leaving.returned_at)
    finally:
        await session.aclose()


async def measure() -> dict[str, float]:
    times: list[float] = []
    with pytest.MonkeyPatch.context() as mp:
        bedrock = offline_bedrock(mp)
        for _ in range(ROUNDS):
            times.append(await one(bedrock))
    return {"tool_return_to_first_request_s": statistics.median(times)}


if __name__ == "__main__":
    if "--measure" in sys.argv:
        from benchmarks._compare import main_measure

        main_measure(measure)
    else:
        from benchmarks._compare import compare

        compare("benchmarks.nova_sonic_handoff", GOALS)
