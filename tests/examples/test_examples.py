"""The examples run against the scripted model (the Nova Sonic one against the recording Bedrock
fake), so they cannot rot."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest

from examples import deferred_handoff, parallel_handoff
from tests.fakes import LLMCall, Reply, ScriptedLLM, bounded, tool_call, wait_for_event


async def test_parallel_handoff_example() -> None:
    def answer(call: LLMCall) -> str:
        return "Billing here: you prefer email." if "billing agent" in (call.instructions or "") else "..."

    fake = ScriptedLLM(
        [
            Reply(
                tool_calls=[
                    tool_call("save_note", {"note": "prefers email"}),
                    tool_call("transfer_to_billing"),
                ]
            )
        ],
        fallback=answer,
    )
    session = await bounded(
        parallel_handoff.run_demo(fake, ["note email, billing please", "what did you note?"])
    )
    assert type(session.current_agent).__name__ == "BillingAgent"
    billing_calls = [c for c in fake.calls if "billing agent" in (c.instructions or "")]
    assert [c.instructions for c in fake.calls].count(fake.calls[0].instructions) == 1
    outputs = [i.output for i in billing_calls[0].chat_ctx.items if i.type == "function_call_output"]
    assert "Saved: prefers email" in outputs


async def test_deferred_handoff_example() -> None:
    lookup: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    fake = ScriptedLLM([Reply(tool_calls=[tool_call("get_weather")])], fallback="One moment.")
    demo = asyncio.ensure_future(deferred_handoff.run_demo(fake, lookup))
    await fake.wait_for_calls(2)  # the tool call, then the reply to the progress update
    lookup.set_result("sunny, 21 degrees")
    session = await bounded(demo)
    assert type(session.current_agent).__name__ == "ForecastAgent"


@pytest.mark.filterwarnings("ignore:datetime.datetime.utcnow:DeprecationWarning")
async def test_nova_sonic_tools_example(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.version_info < (3, 12):
        pytest.skip("the Nova Sonic extra needs Python 3.12+")
    from livekit.plugins.aws.experimental.realtime import RealtimeModel
    from livekit.plugins.aws.experimental.realtime.realtime_model import DEFAULT_REPLY_PROMPT

    from examples import nova_sonic_tools
    from tests.fakes.bedrock_stream import (
        BedrockConnection,
        SentEvent,
        ServerEvent,
        is_interactive_text,
        is_tool_result,
        model_turn,
        offline_bedrock,
        sent_texts,
    )

    bedrock = offline_bedrock(monkeypatch)
    lookup: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def _first_update_heard(conn: BedrockConnection, sent: SentEvent) -> list[ServerEvent]:
        lookup.set_result("order 42 shipped yesterday")  # the slow work ends once the model heard
        return model_turn("One moment.")

    def _prompt(prefix: str) -> Callable[[SentEvent], bool]:
        return lambda e: e["event"].get("textInput", {}).get("content", "").startswith(prefix)

    bedrock.reply_when(is_interactive_text(DEFAULT_REPLY_PROMPT), model_turn("Welcome to the order desk."))
    bedrock.reply_when(
        is_interactive_text("Where is my order 42?"),
        model_turn(tool=("tool-1", "check_order", {"order_id": "42"})),
    )
    bedrock.reply_when(is_tool_result("tool-1"), _first_update_heard)
    bedrock.reply_when(_prompt("New results arrived"), model_turn("Order 42 shipped yesterday."))
    bedrock.reply_when(is_interactive_text(TURNS[1]), model_turn(tool=("tool-2", "verify_caller", {})))
    bedrock.reply_when(
        is_interactive_text("Ask the caller for their date of birth."),
        model_turn("What is your date of birth?"),
    )
    bedrock.reply_when(
        is_interactive_text(TURNS[2]),
        model_turn(tool=("tool-3", "record_date_of_birth", {"date_of_birth": "1990-01-05"})),
    )
    bedrock.reply_when(
        _prompt("[Result of the tool call verify_caller"), model_turn("Thanks, you are verified.")
    )

    async def between_turns(i: int) -> None:
        if i == 0:  # the follow-up reply to the async tool's final result
            await bounded(_said(session_ref[0], "Order 42 shipped yesterday."))
        elif i == 1:  # the task asked
            await bounded(_said(session_ref[0], "What is your date of birth?"))
        else:  # the desk answered the task's result, on the stream it resumed on
            await bounded(_said(session_ref[0], "Thanks, you are verified."))

    session_ref: list[Any] = []
    session = await bounded(
        nova_sonic_tools.run_demo(
            RealtimeModel.with_nova_sonic_2(),
            TURNS,
            lookup=lookup,
            between_turns=between_turns,
            on_start=session_ref.append,
        ),
        20,
    )
    said = [(m.role, m.text_content) for m in session.history.messages() if m.text_content]
    assert said == [
        ("assistant", "Welcome to the order desk."),
        ("user", TURNS[0]),
        ("assistant", "One moment."),
        ("assistant", "Order 42 shipped yesterday."),
        ("user", TURNS[1]),
        ("assistant", "What is your date of birth?"),
        ("user", TURNS[2]),
        ("assistant", "Thanks, you are verified."),
    ], said
    finals = [t for _, _, t in sent_texts(bedrock.connections[0].sent) if "order 42 shipped yesterday" in t]
    assert len(finals) == 1  # the async tool's final result reached the model
    assert bedrock.violations == []


TURNS = [
    "Where is my order 42?",
    "I'd like to change the delivery address, can you verify me?",
    "The fifth of January, 1990.",
]


async def _said(session: Any, text: str) -> None:
    """Until an assistant message ``text`` is in the history."""
    while not any(m.role == "assistant" and m.text_content == text for m in session.history.messages()):
        await wait_for_event(session, "conversation_item_added")
