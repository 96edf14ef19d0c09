"""Parallel tool calls where one tool hands off (livekit/agents#5150, fixed by the fork).

The front-desk agent saves a note and transfers to billing in the same model turn. On the
fork the front desk says nothing more once it hands off, and the billing agent, built from
the front desk's context, sees the whole turn (the saved note included) in its first reply.

Run it in text mode, no room needed:

    OPENAI_API_KEY=... uv run --with livekit-plugins-openai python examples/parallel_handoff.py

Without a key it explains what it needs; tests/examples runs it against a scripted model.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from livekit.agents import Agent, AgentSession, function_tool, llm


class BillingAgent(Agent):
    def __init__(self, chat_ctx: llm.ChatContext) -> None:
        super().__init__(
            instructions="You are the billing agent. Confirm what the front desk saved.",
            chat_ctx=chat_ctx,
        )


class FrontDesk(Agent):
    def __init__(self) -> None:
        super().__init__(
            instructions=(
                "You are the front desk. When the caller gives a note and wants billing, call "
                "save_note and transfer_to_billing in the same turn."
            )
        )
        self.notes: list[str] = []

    @function_tool
    async def save_note(self, note: str) -> str:
        """Save a note about the caller."""
        self.notes.append(note)
        return f"Saved: {note}"

    @function_tool
    async def transfer_to_billing(self) -> Agent:
        """Transfer the caller to the billing agent."""
        # the documented pattern: carry the conversation over
        return BillingAgent(chat_ctx=self.chat_ctx)


async def run_demo(model: llm.LLM, turns: list[str]) -> AgentSession[Any]:
    """Run the conversation in text mode; returns the (closed) session for inspection."""
    session: AgentSession[Any] = AgentSession(llm=model, vad=None, turn_handling={"turn_detection": None})
    await session.start(FrontDesk(), record=False)
    try:
        for text in turns:
            print(f"user: {text}")
            result = await session.run(user_input=text)
            for ev in result.events:
                if ev.type == "message":
                    print(f"{type(session.current_agent).__name__}: {ev.item.text_content}")
                elif ev.type == "function_call":
                    print(f"  -> {ev.item.name}({ev.item.arguments})")
                elif ev.type == "agent_handoff":
                    print(f"  == handoff to {type(ev.new_agent).__name__}")
    finally:
        await session.aclose()
    return session


def main() -> None:
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("set OPENAI_API_KEY (and install livekit-plugins-openai) to run this with a real model")
    from livekit.plugins import openai

    turns = ["Note that I prefer email, and put me through to billing.", "What did you note for me?"]
    asyncio.run(run_demo(openai.LLM(model="gpt-4o-mini"), turns))


if __name__ == "__main__":
    main()
