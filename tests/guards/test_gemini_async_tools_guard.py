"""Guards: a Gemini Live agent's tool results reach the socket, as on upstream.

A plain tool's result answers the call with a ``tool_response`` carrying the call's id. An
async tool (one that calls ``ctx.update()``) answers the call with its first update; each
later update and its final return come as a synthetic call of their own
(``<call_id>_update_<n>``, ``<call_id>_final``) with their output, in one
``update_chat_ctx()``, followed by a deferred reply that asks the model to speak about them.
Upstream 1.8.9 answers those with a ``tool_response`` carrying the synthetic id, before the
reply request; so does a deferred ``(Agent, "message")`` return. The synthetic id is not one
the server issued (hence no ``assert_only_issued_call_ids`` there): that is upstream's wire
format on the connection that issued the call, kept as it is. Every case asserts exactly what
went on the wire (``tests.fakes.genai_live``, under the real google-genai session).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.genai import types
from livekit.agents import Agent, AgentSession, RunContext, function_tool
from livekit.plugins.google.realtime import RealtimeModel

from tests.fakes import Gate, MakeSession, ScriptedLLM, bounded, spoken, wait_for_event
from tests.fakes.genai_live import (
    FakeLiveServer,
    LiveConnection,
    WireMessage,
    assert_only_issued_call_ids,
    client_content,
    function_responses,
    model_text_message,
    offline_live_server,
    tool_call_message,
)

# the templates the framework wraps an update and asks for a deferred reply with, made
# short so the wire can be asserted exactly
ASYNC_OPTIONS = {
    "update_template": "{function_name} update: {message}",
    "reply_at_tail_template": "speak about {call_ids}",
    "reply_maybe_covered_template": "maybe speak about {call_ids}",
}


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> FakeLiveServer:
    return offline_live_server(monkeypatch)


@pytest.fixture
def gate(make_session: MakeSession) -> Iterator[Callable[[str], Gate]]:
    """``gate(name)``: a new Gate. Torn down before the sessions close: a tool held on a gate
    a failed test never opened returns, instead of holding up the session's close."""
    made: list[Gate] = []

    def _new(name: str) -> Gate:
        made.append(Gate(name))
        return made[-1]

    yield _new
    for g in made:
        g.open()


def gemini() -> RealtimeModel:
    # text output needs no audio pipeline; the default 2.5 model asks for replies with "."
    return RealtimeModel(modalities=[types.Modality.TEXT])


def user_text(text: str, *, turn_complete: bool) -> WireMessage:
    return {
        "client_content": {
            "turns": [{"role": "user", "parts": [{"text": text}]}],
            "turnComplete": turn_complete,
        }
    }


def reply_request(instructions: str) -> WireMessage:
    """What ``generate_reply(instructions=...)`` sends on the default 2.5 model."""
    turns = [
        {"role": "model", "parts": [{"text": instructions}]},
        {"role": "user", "parts": [{"text": "."}]},
    ]
    return {"client_content": {"turns": turns, "turnComplete": True}}


def tool_response(call_id: str, name: str, output: str) -> WireMessage:
    return {
        "tool_response": {
            "functionResponses": [{"id": call_id, "name": name, "response": {"output": output}}]
        }
    }


def is_reply_request(message: WireMessage) -> bool:
    return bool((client_content(message) or {}).get("turnComplete"))


async def model_says(session: AgentSession[Any], conn: LiveConnection, text: str) -> None:
    """The server answers with ``text``; returns once the session recorded it as said."""
    said = asyncio.ensure_future(
        wait_for_event(
            session,
            "conversation_item_added",
            lambda ev: (
                ev.item.type == "message" and ev.item.role == "assistant" and ev.item.text_content == text
            ),
        )
    )
    conn.push(model_text_message(text))
    await said


async def reply_requested_after(conn: LiveConnection, release: Gate, what: str) -> None:
    """Opens ``release``, then waits (bounded) for the reply request that follows."""
    start = len(conn.sent)
    release.open()
    await conn.wait_sent(is_reply_request, start=start, what=what)


# -- an async tool: updates, then its return -----------------------------------------------------


class Researcher(Agent):
    """An async tool: a first update, a second one, then its return; each held on a gate."""

    def __init__(self, second_update: Gate, returns: Gate) -> None:
        super().__init__(instructions="You research.", tool_handling={"async_options": ASYNC_OPTIONS})
        self.second_update = second_update
        self.returns = returns

    @function_tool
    async def research(self, ctx: RunContext[Any], topic: str) -> str:
        """Research a topic."""
        await ctx.update(f"reading about {topic}")
        await self.second_update.wait()
        await ctx.update("found two papers")
        await self.returns.wait()
        return "three papers on bees"


async def test_async_tool_updates_and_return_reach_the_socket(
    live: FakeLiveServer, make_session: MakeSession, gate: Callable[[str], Gate]
) -> None:
    second_update, returns = gate("second update"), gate("research returns")
    session = await make_session(Researcher(second_update, returns), llm=gemini())
    conn = await live.connection(0)
    run = session.run(user_input="research bees")
    await conn.wait_sent(is_reply_request, what="the user turn")
    conn.push(tool_call_message(("fc-1", "research", {"topic": "bees"})))
    # the first update answers the call, and the model answers it
    await conn.wait_sent(lambda m: bool(function_responses(m)), what="the first update")
    await model_says(session, conn, "Reading now.")
    await bounded(run, what="session.run")

    await reply_requested_after(conn, second_update, "the reply to the second update")
    await model_says(session, conn, "Two papers so far.")
    await reply_requested_after(conn, returns, "the reply to the return")
    await model_says(session, conn, "Three papers in all.")

    # each result goes out before the request to speak about it
    assert conn.sent == [
        user_text("research bees", turn_complete=False),
        user_text(".", turn_complete=True),
        tool_response("fc-1", "research", "research update: reading about bees"),
        tool_response("fc-1_update_1", "research", "research update: found two papers"),
        reply_request("speak about ['fc-1_update_1']"),
        tool_response("fc-1_final", "research", "three papers on bees"),
        reply_request("speak about ['fc-1_final']"),
    ]
    assert spoken(session) == ["Reading now.", "Two papers so far.", "Three papers in all."]
    assert len(live.connections) == 1


# -- a deferred (Agent, "message") return ------------------------------------------------------


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You handle billing.", llm=ScriptedLLM([], fallback="Billing here."))


class Front(Agent):
    def __init__(self, returns: Gate) -> None:
        super().__init__(instructions="You take calls.", tool_handling={"async_options": ASYNC_OPTIONS})
        self.returns = returns

    @function_tool
    async def transfer(self, ctx: RunContext[Any]) -> tuple[Agent, str]:
        """Transfer the caller to billing."""
        await ctx.update("finding a free agent")
        await self.returns.wait()
        return Billing(), "transferring you to billing"


# upstream 1.8.9 records an error as the return's result, and logs it (livekit/agents#5936)
@pytest.mark.allow_error_logs(r"returned an Agent after ctx\.update\(\)")
async def test_deferred_agent_and_message_reach_the_socket(
    live: FakeLiveServer, make_session: MakeSession, gate: Callable[[str], Gate]
) -> None:
    """Whatever the framework records as the return's result reaches the model, before the
    request to speak about it (whether the handoff then happens is #5936's business)."""
    returns = gate("transfer returns")
    session = await make_session(Front(returns), llm=gemini())
    conn = await live.connection(0)
    run = session.run(user_input="a question about my bill")
    await conn.wait_sent(is_reply_request, what="the user turn")
    conn.push(tool_call_message(("fc-1", "transfer", {})))
    await conn.wait_sent(lambda m: bool(function_responses(m)), what="the update")
    await model_says(session, conn, "One moment.")
    await bounded(run, what="session.run")

    await reply_requested_after(conn, returns, "the reply to the return")

    final = next(
        i for i in session.history.items if i.type == "function_call_output" and i.call_id == "fc-1_final"
    )
    response = {"error" if final.is_error else "output": final.output}
    assert conn.sent == [
        user_text("a question about my bill", turn_complete=False),
        user_text(".", turn_complete=True),
        tool_response("fc-1", "transfer", "transfer update: finding a free agent"),
        {
            "tool_response": {
                "functionResponses": [{"id": "fc-1_final", "name": "transfer", "response": response}]
            }
        },
        reply_request("speak about ['fc-1_final']"),
    ]
    await model_says(session, conn, "Transferring you now.")
    assert spoken(session)[:2] == ["One moment.", "Transferring you now."]


# -- a plain tool --------------------------------------------------------------------------------


class Forecaster(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You know the weather.")

    @function_tool
    async def weather(self, city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"


async def test_plain_tool_result_is_a_tool_response(live: FakeLiveServer, make_session: MakeSession) -> None:
    session = await make_session(Forecaster(), llm=gemini())
    conn = await live.connection(0)
    run = session.run(user_input="weather in Paris?")
    await conn.wait_sent(is_reply_request, what="the user turn")
    conn.push(tool_call_message(("fc-1", "weather", {"city": "Paris"})))
    await conn.wait_sent(lambda m: bool(function_responses(m)), what="the result")
    await model_says(session, conn, "It is sunny in Paris.")
    await bounded(run, what="session.run")

    assert conn.sent == [
        user_text("weather in Paris?", turn_complete=False),
        user_text(".", turn_complete=True),
        tool_response("fc-1", "weather", "sunny in Paris"),
    ]
    assert spoken(session) == ["It is sunny in Paris."]
    assert_only_issued_call_ids(live)
