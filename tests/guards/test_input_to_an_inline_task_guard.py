"""Guards: typed input to an inline ``AgentTask`` that runs, and to the agent it returns to
(pass on stock 1.8.9 and on the fork).

Handing input given while an inline task starts to the agent it returns to, when the task
completes in its own ``on_enter`` (see
tests/regression/test_6313_input_to_a_task_over_at_once.py), must leave these as they are:

* input given once the task runs (its ``on_enter`` over, not completed) is the task's: the
  task answers it, once, and the agent that awaits it says nothing;
* input given once the task completed and the agent it returns to resumed is that agent's:
  it answers it, once, and the task says nothing after its ``on_exit``.
"""

from __future__ import annotations

import pytest
from livekit.agents import function_tool

from tests import fakes
from tests.fakes import (
    MODEL_KINDS,
    JournalingAgent,
    JournalingTask,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    bounded,
    scripted_model,
    spoken,
    tool_call,
)
from tests.fakes.history import user_messages
from tests.fakes.session import settled_on

DESK = "You are the front desk."
CHECK = "You check the account."
CHECK_IT = "Check my account."
TO_TASK = "My account number is 42."
TO_DESK = "Thanks, anything else?"


class Journal(fakes.Journal):
    def __init__(self) -> None:
        super().__init__()
        # the replies to the caller's input: instructions, the input, the journal so far
        self.answers: list[tuple[str | None, str | None, tuple[str, ...]]] = []

    def answer(self, call: LLMCall | RTGeneration) -> Reply:
        items = call.chat_ctx.items
        users = [n for n, i in enumerate(items) if i.type == "message" and i.role == "user"]
        # the desk's reply to the check's result answers the tool, not the caller
        if not any(i.type == "function_call_output" for i in items[users[-1] if users else 0 :]):
            self.answers.append((call.instructions, call.last_user_text, tuple(self.events)))
        if call.last_user_text == CHECK_IT and call.tool_choice != "none" and call.instructions == DESK:
            if not any(i.type == "function_call_output" for i in call.chat_ctx.items):
                return Reply(tool_calls=[tool_call("check_account")])
        return Reply(f"{call.instructions} answers: {call.last_user_text}")


class Desk(JournalingAgent):
    journal: Journal

    @function_tool
    async def check_account(self) -> str:
        """Check the caller's account."""
        result = await JournalingTask[str](self.journal, name="check", instructions=CHECK)
        self.journal.results.append(result)
        return result


@pytest.mark.parametrize("kind", MODEL_KINDS)
async def test_input_to_a_running_inline_task_and_to_the_agent_it_returns_to(
    make_session: MakeSession, kind: str
) -> None:
    journal = Journal()
    desk = Desk(journal, name="desk", instructions=DESK)
    session = await make_session(desk, llm=scripted_model(kind, fallback=journal.answer))

    session.generate_reply(user_input=CHECK_IT)
    await bounded(journal.entered["check"].wait(), what="the check's on_enter")
    task = session.current_agent
    assert isinstance(task, JournalingTask)
    await settled_on(session, task)

    await bounded(session.generate_reply(user_input=TO_TASK), what="the check's answer")
    task.complete("account ok")
    await settled_on(session, desk)
    await bounded(session.generate_reply(user_input=TO_DESK), what="the desk's answer")
    await settled_on(session, desk)

    assert journal.results == ["account ok"]
    assert [(i, text) for i, text, _ in journal.answers if text in (TO_TASK, TO_DESK)] == [
        (CHECK, TO_TASK),
        (DESK, TO_DESK),
    ]
    assert [i for i, _, events in journal.answers if "exit check" in events and i == CHECK] == []
    assert user_messages(session, TO_TASK) == 1
    assert user_messages(session, TO_DESK) == 1
    assert spoken(session).count(f"{CHECK} answers: {TO_TASK}") == 1
    assert spoken(session).count(f"{DESK} answers: {TO_DESK}") == 1
    assert journal.events == ["enter desk", "enter check", "exit check"]
