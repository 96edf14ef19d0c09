"""The agent a handoff brings in starts an inline AgentTask in its ``on_enter()`` (an intake
form, a consent check), as many agents do. The caller speaks to the task once it runs: the
task, the current agent, hears and answers each turn, once, and the agent that awaits it says
nothing meanwhile (an activity that starts must not block its own turns, see
``AgentActivity._start_session()``). Parity: stock does this right.
"""

from __future__ import annotations

from tests.fakes import MakeSession
from tests.regression.test_3129_spoken_turn_to_an_inline_task_started_by_the_arriving_agent import (
    the_caller_speaks_to_an_inline_task_the_arriving_agent_started,
)


async def test_the_caller_speaks_to_an_inline_task_the_arriving_agent_started(
    make_session: MakeSession,
) -> None:
    await the_caller_speaks_to_an_inline_task_the_arriving_agent_started(
        make_session, while_handing_off=False
    )
