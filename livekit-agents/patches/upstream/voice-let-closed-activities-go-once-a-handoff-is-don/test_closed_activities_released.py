"""Activities closed by handoffs are freed, not kept alive for the whole session."""

from __future__ import annotations

import gc
import weakref

import pytest

from livekit.agents import Agent, AgentSession, function_tool
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

USER = "Next desk, please."
HANDOFFS = 12


class Desk(Agent):
    def __init__(self, name: str) -> None:
        super().__init__(instructions=f"You are desk {name}.")
        self.name = name

    @function_tool
    async def switch(self) -> Agent:
        """Send the caller to the other desk."""
        return Desk("B" if self.name == "A" else "A")


def _current_activity(session: AgentSession) -> weakref.ref[object]:
    activity = session._activity
    assert activity is not None
    return weakref.ref(activity)


async def test_activities_closed_by_handoffs_are_freed() -> None:
    fake_llm = FakeLLM(
        fake_responses=[
            FakeLLMResponse(
                input=USER,
                content="",
                ttft=0,
                duration=0,
                tool_calls=[FunctionToolCall(name="switch", arguments="{}", call_id="call_1")],
            )
        ]
    )
    # text only: no VAD
    async with AgentSession(llm=fake_llm, vad=None) as session:
        await session.start(Desk("A"))
        activities = [_current_activity(session)]
        for _ in range(HANDOFFS):
            await session.run(user_input=USER)
            activities.append(_current_activity(session))

        handoffs = [item for item in session.history.items if item.type == "agent_handoff"]
        assert len(handoffs) == HANDOFFS + 1  # the first one is the session's start

        gc.collect()
        # the current activity and the one before it may still be referenced by the last run
        alive = [i for i, ref in enumerate(activities[:-2]) if ref() is not None]
        assert alive == []
