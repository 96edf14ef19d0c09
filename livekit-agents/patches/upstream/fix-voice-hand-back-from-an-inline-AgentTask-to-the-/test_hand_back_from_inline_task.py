"""Handing the conversation back from an inline AgentTask to the agent that awaits it."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, ToolError, function_tool
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

OPEN_FORM = "I need to fill in a form."
GO_BACK = "Take me back to the desk."


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.form: FormTask | None = None
        self.tool_results: list[str | ToolError] = []
        self.entered = 0
        self.exited = 0

    async def on_enter(self) -> None:
        self.entered += 1

    async def on_exit(self) -> None:
        self.exited += 1

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        self.form = FormTask(desk=self)
        try:
            answer = await self.form
        except ToolError as e:
            self.tool_results.append(e)
            raise
        self.tool_results.append(answer)
        return answer


class FormTask(AgentTask[str]):
    def __init__(self, desk: Desk) -> None:
        super().__init__(instructions="You collect the form.")
        self.desk = desk

    @function_tool
    async def back_to_desk(self) -> Agent:
        """Go back to the front desk."""
        return self.desk


def _respond(text: str, call: FunctionToolCall) -> FakeLLMResponse:
    return FakeLLMResponse(input=text, content="", ttft=0, duration=0, tool_calls=[call])


async def test_tool_returning_the_suspended_agent_hands_back() -> None:
    fake_llm = FakeLLM(
        fake_responses=[
            _respond(OPEN_FORM, FunctionToolCall(name="open_form", arguments="{}", call_id="c1")),
            _respond(GO_BACK, FunctionToolCall(name="back_to_desk", arguments="{}", call_id="c2")),
        ]
    )
    desk = Desk()
    session = AgentSession(llm=fake_llm)
    await session.start(desk)
    try:
        await asyncio.wait_for(session.run(user_input=OPEN_FORM), timeout=5)
        assert isinstance(session.current_agent, FormTask)

        await asyncio.wait_for(session.run(user_input=GO_BACK), timeout=5)

        # the desk resumes (no second on_enter), and its tool gets an error saying why
        assert session.current_agent is desk
        assert len(desk.tool_results) == 1, "the desk's open_form never returned"
        assert isinstance(desk.tool_results[0], ToolError)
        assert (desk.entered, desk.exited) == (1, 0)
    except BaseException:
        await _unwedge(session, desk)
        raise
    await asyncio.wait_for(session.aclose(), timeout=5)


async def _unwedge(session: AgentSession, desk: Desk) -> None:
    """Where the hand back fails, the desk's tool waits on the task for ever and the session
    cannot close: make the task current again and complete it, so the desk resumes and the
    failure reported is the assertion, not the leftover tasks."""
    form = desk.form
    if form is not None and not form.done():
        if session.current_agent is not form:
            with contextlib.suppress(RuntimeError):
                session.update_agent(form)
        form.complete("unwedged")
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(session.aclose(), timeout=5)
