"""An async tool's deferred return, delivered while another turn of the agent is in flight.

The front desk's ``get_weather`` says ``await ctx.update("Please hold on")``, waits on a Gate,
then returns the weather desk agent. Meanwhile the caller asks for something else and the LLM
calls ``check``, whose speech stays in flight while it runs. Stock 1.8.9 refuses the deferred
handoff (#5936) and voices an error instead; the fork hands off at the next turn boundary.
Either way nothing may wedge, and what a tool holds the floor for still happens:
``check`` enters ``ctx.foreground()`` after the deferred return arrived: ``foreground()``
first waits for the executor's pending reply, and that reply must not wait for ``check``'s
own turn, which waits for ``check``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, RunContext, function_tool

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    ScriptedLLM,
    bounded,
    spoken,
    tool_call,
    wait_for_event,
)

FRONT = "You are the front desk agent."
WEATHER = "You are the weather desk agent."
HOLD_ON_REPLY = "One moment while I check the weather."
WEATHER_ID = "call_weather"
CHECK_ID = "call_check"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.weather_gate = Gate("get_weather")
        self.check_gate = Gate("check")
        self.weather: WeatherDesk | None = None


class WeatherDesk(JournalingAgent):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="weather", instructions=WEATHER)


class FrontDesk(JournalingAgent):
    journal: Journal

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="front", instructions=FRONT)

    @function_tool
    async def get_weather(self, ctx: RunContext) -> Agent:
        """Look up the weather."""
        await ctx.update("Please hold on")
        await self.journal.weather_gate.wait()
        self.journal.weather = WeatherDesk(self.journal)
        return self.journal.weather

    @function_tool
    async def check(self, ctx: RunContext) -> str:
        """Check the booking."""
        await self.journal.check_gate.wait()
        async with ctx.foreground():
            self.journal.events.append("check holds the floor")
        return "the booking is confirmed"


def answers(call: LLMCall) -> str:
    return {WEATHER: "Weather desk here."}.get(call.instructions or "", "Noted.")


def weather_ended(ev: Any) -> bool:
    return ev.update.type == "tool_call_ended" and ev.update.call_id == WEATHER_ID


async def hold_weather(session: AgentSession[Any], journal: Journal) -> None:
    await bounded(session.run(user_input="What's the weather in Paris?"), what="weather turn")
    await journal.weather_gate.reached()
    assert spoken(session) == [HOLD_ON_REPLY]


async def release_weather(session: AgentSession[Any], journal: Journal) -> None:
    ended = asyncio.ensure_future(wait_for_event(session, "tool_execution_updated", weather_ended))
    journal.weather_gate.open()
    await ended


# stock refuses the deferred handoff itself with this error (#5936, fixed by the fork)
@pytest.mark.allow_error_logs(r"returned an Agent after ctx\.update\(\)")
async def test_foreground_in_a_turn_in_flight_does_not_wedge(make_session: MakeSession) -> None:
    journal = Journal()
    fake = ScriptedLLM(
        [
            Reply(tool_calls=[tool_call("get_weather", call_id=WEATHER_ID)]),
            HOLD_ON_REPLY,
            Reply(tool_calls=[tool_call("check", call_id=CHECK_ID)]),
        ],
        fallback=answers,
    )
    session = await make_session(FrontDesk(journal), llm=fake)
    await hold_weather(session, journal)

    # the second turn's speech stays in flight while `check` runs
    turn = asyncio.ensure_future(session.run(user_input="And is my booking confirmed?"))
    await journal.check_gate.reached()
    # the deferred return arrives while that turn is in flight, then `check` asks for the floor
    await release_weather(session, journal)
    journal.check_gate.open()

    await bounded(turn, what="the turn whose tool holds the floor")
    assert "check holds the floor" in journal.events
    outputs = [i for i in session.history.items if i.type == "function_call_output" and i.call_id == CHECK_ID]
    assert [o.output for o in outputs] == ["the booking is confirmed"]
    # the session still serves the caller, whichever agent it is now
    await bounded(session.run(user_input="Thanks."), what="the next turn")
