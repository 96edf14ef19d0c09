"""Review of 0005 (merged again once resumed), on a realtime model.

An agent awaits an inline task in its ``on_enter``; the task answers the user and completes
while that answer is still streaming. 0005 merges the task's context into the agent's a
second time once the agent resumed, so the late answer is in the agent's context. The agent's
realtime session must have it too: its next generation is made from the session's context,
and a model that sees the question unanswered answers it again.
"""

from __future__ import annotations

import asyncio

import pytest

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedRealtimeModel,
    bounded,
)

DESK = "You are the front desk."
FORM = "You collect the form."
QUESTION = "Which form is it?"
ANSWER = "It is the blue form."
NEXT = "Thanks, what now?"
FILLED = "form filled"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        self.handed_back = asyncio.Event()


class FormTask(fakes.JournalingTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, name="form", instructions=FORM)


class Desk(JournalingAgent):
    journal: Journal

    async def on_enter(self) -> None:
        await super().on_enter()
        self.journal.results.append(await FormTask(self.journal))
        self.journal.handed_back.set()


def messages(gen: RTGeneration) -> list[str | None]:
    return [i.text_content for i in gen.chat_ctx.items if i.type == "message"]


@pytest.mark.upstream_bug("livekit/agents#3129")
@pytest.mark.parametrize("reuse", [True, False], ids=["reused", "replaced"])
async def test_the_agent_s_realtime_session_has_the_task_s_last_answer(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = Journal()
    answering = Gate("the form's answer streaming")

    def answer(gen: RTGeneration) -> Reply:
        if gen.instructions == FORM and QUESTION in messages(gen) and ANSWER not in messages(gen):
            return Reply(ANSWER, hold=answering)
        return Reply(f"{gen.instructions} answers")

    model = ScriptedRealtimeModel([], fallback=answer, reuse=reuse)
    session = await make_session(Desk(journal, name="desk", instructions=DESK), llm=model)

    await bounded(journal.entered["form"].wait(), what="the form's on_enter")
    task = session.current_agent
    assert isinstance(task, FormTask)

    session.generate_reply(user_input=QUESTION)
    await answering.reached()
    task.complete(FILLED)
    answering.open()
    await bounded(journal.handed_back.wait(), what="the desk resuming with the form's result")
    await bounded(session.wait_for_idle(), what="the session settling on the desk")
    assert ANSWER in [m.text_content for m in session.history.messages()], "the form never answered"

    await bounded(session.run(user_input=NEXT), what="the desk's reply")
    desk_gens = [g for g in model.generations if g.instructions == DESK]
    assert desk_gens, "the desk never answered the caller's next turn"
    seen = messages(desk_gens[-1])
    assert QUESTION in seen, seen
    assert ANSWER in seen, f"the desk's realtime session lacks the form's answer to the caller: {seen}"
    await bounded(session.aclose(), what="AgentSession.aclose")
