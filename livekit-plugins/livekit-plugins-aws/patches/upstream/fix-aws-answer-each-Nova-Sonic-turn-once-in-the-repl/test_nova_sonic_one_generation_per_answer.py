"""Nova Sonic: each generation is announced once, so ``run()`` holds the model's answer.

Nova Sonic 2 answers typed text. The session must announce one generation per answer to the
framework: before the fix it announced one when the text was sent and another when the answer
started, so the framework's reply to the typed turn was an empty generation, ``run()`` returned
without the answer, and the answer played as a second, unrelated speech.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from livekit.agents import Agent, function_tool

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
    model_turn,
    offline_session,
)

QUESTION = "when do you open?"
ANSWER = "We open at nine."


class Concierge(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a concierge.")
        self.lookups: list[str] = []

    @function_tool
    async def lookup(self, q: str) -> str:
        """Look up the opening hours."""
        self.lookups.append(q)
        return "open 9 to 5"


def _run_items(result: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for ev in result.events:
        if ev.type == "message":
            out.append((f"message/{ev.item.role}", ev.item.text_content or ""))
        elif ev.type == "function_call":
            out.append(("function_call", ev.item.call_id))
        elif ev.type == "function_call_output":
            out.append(("function_call_output", ev.item.output))
    return out


async def test_typed_turn_run_holds_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer(QUESTION, model_turn(ANSWER))
    async with offline_session() as session:
        speeches: list[Any] = []
        session.on("speech_created", lambda ev: speeches.append(ev.speech_handle))
        await session.start(Concierge())
        await bedrock.stream(0)

        result = await asyncio.wait_for(session.run(user_input=QUESTION), TIMEOUT)

        assert _run_items(result) == [("message/assistant", ANSWER)], (
            "run() returned without the answer"
        )
        assert len(speeches) == 1, f"one generation, {len(speeches)} speeches"


async def test_tool_turn_run_holds_call_output_and_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    bedrock = FakeBedrock(monkeypatch)
    bedrock.answer(QUESTION, model_turn(tool=("tool-1", "lookup", {"q": "hours"})))
    bedrock.answer("open 9 to 5", model_turn(ANSWER))
    agent = Concierge()
    async with offline_session() as session:
        await session.start(agent)
        await bedrock.stream(0)

        result = await asyncio.wait_for(session.run(user_input=QUESTION), TIMEOUT)

        assert _run_items(result) == [
            ("function_call", "tool-1"),
            ("function_call_output", "open 9 to 5"),
            ("message/assistant", ANSWER),
        ], "run() returned before the model's turn"
        assert agent.lookups == ["hours"]
