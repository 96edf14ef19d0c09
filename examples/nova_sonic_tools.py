"""Nova Sonic 2: an async tool that reports progress, and an AgentTask awaited in a tool.

``check_order`` tells the caller to hold on with ``ctx.update()``, keeps working, and returns
the status later: on stock 1.8.9 the plugin drops that later result, so the model is asked to
summarize results it never got; the fork sends it (aws 0002). ``verify_caller`` awaits an
``AgentTask`` that asks for the caller's date of birth: the desk agent pauses, its Bedrock
stream closes while the model's call is open, and the result arrives on the stream it resumes
on; stock drops it there, the fork has the model answer it (aws 0003). The desk greets from its
``on_enter`` with ``generate_reply()`` and no instructions, which on stock never resolves and
holds every later turn (aws 0005).

Text mode, no room needed; Nova Sonic 2 takes typed turns (AWS credentials from the usual
chain, e.g. AWS_PROFILE or AWS_ACCESS_KEY_ID, and access to amazon.nova-2-sonic-v1:0):

    uv run python examples/nova_sonic_tools.py

tests/examples runs it against the recording fake of the Bedrock stream.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from livekit.agents import Agent, AgentSession, AgentTask, RunContext, function_tool, llm


class VerifyCaller(AgentTask[str]):
    """Asks for the caller's date of birth; completes with it."""

    def __init__(self) -> None:
        super().__init__(instructions="You verify the caller. Ask for their date of birth, nothing else.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="Ask the caller for their date of birth.")

    @function_tool
    async def record_date_of_birth(self, date_of_birth: str) -> None:
        """Record the date of birth the caller gave."""
        self.complete(date_of_birth)


class OrderDesk(Agent):
    def __init__(self, lookup: asyncio.Future[str] | None = None) -> None:
        super().__init__(
            instructions=(
                "You are an order desk. Use check_order for an order's status. Before you "
                "change anything, use verify_caller."
            )
        )
        self._lookup = lookup  # a test can control when the slow work finishes

    async def on_enter(self) -> None:
        # no instructions: the model greets from its system prompt and the conversation so far
        self.session.generate_reply()

    async def _slow_lookup(self, order_id: str) -> str:
        if self._lookup is not None:
            return await self._lookup
        await asyncio.sleep(2)  # stands in for a slow backend call
        return f"order {order_id} shipped yesterday"

    @function_tool
    async def check_order(self, ctx: RunContext, order_id: str) -> str:
        """Look up the status of an order."""
        await ctx.update("Let me check that order, one moment.")
        return await self._slow_lookup(order_id)

    @function_tool
    async def verify_caller(self) -> str:
        """Verify the caller's identity before changing an order."""
        date_of_birth = await VerifyCaller()
        return f"caller verified (date of birth {date_of_birth})"


def _print_turn(session: AgentSession[Any], ev: Any) -> None:
    item = ev.item
    if isinstance(item, llm.ChatMessage) and item.text_content:
        print(f"{item.role} ({type(session.current_agent).__name__}): {item.text_content}")


async def run_demo(
    model: llm.RealtimeModel,
    turns: Sequence[str],
    *,
    lookup: asyncio.Future[str] | None = None,
    between_turns: Callable[[int], Awaitable[None]] | None = None,
    on_start: Callable[[AgentSession[Any]], None] | None = None,
) -> AgentSession[Any]:
    """Type ``turns`` one after the other, printing the conversation; returns the closed session.

    After each turn the demo waits for the agent to go idle, and for ``between_turns(i)`` if
    given (a test waits there for the reply it scripted)."""
    session: AgentSession[Any] = AgentSession(llm=model, vad=None, turn_handling={"turn_detection": None})
    session.on("conversation_item_added", lambda ev: _print_turn(session, ev))
    if on_start is not None:
        on_start(session)
    await session.start(OrderDesk(lookup), record=False)
    try:
        await session.wait_for_idle()  # the greeting
        for i, text in enumerate(turns):
            # like a text input: the turn need not wait for the reply before (the task's
            # question is asked while the tool that awaits the task is still running)
            session.generate_reply(user_input=text)
            await session.wait_for_idle()
            if between_turns is not None:
                await between_turns(i)
    finally:
        await session.aclose()
    return session


def main() -> None:
    if sys.version_info < (3, 12):
        sys.exit("the Nova Sonic extra needs Python 3.12+")
    import boto3

    if boto3.Session().get_credentials() is None:
        sys.exit("no AWS credentials found (AWS_PROFILE, AWS_ACCESS_KEY_ID, ...): needed for Bedrock")
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    turns = [
        "Where is my order 42?",
        "I'd like to change the delivery address, can you verify me?",
        "The fifth of January, 1990.",
    ]
    asyncio.run(run_demo(RealtimeModel.with_nova_sonic_2(), turns))


if __name__ == "__main__":
    main()
