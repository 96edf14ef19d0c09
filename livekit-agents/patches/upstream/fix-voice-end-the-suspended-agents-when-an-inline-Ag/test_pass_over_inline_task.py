"""A handoff from inside an inline AgentTask to an agent other than the one awaiting it."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from livekit.agents import Agent, AgentSession, AgentTask, ToolError, function_tool
from livekit.agents.llm import FunctionToolCall

from .fake_llm import FakeLLM, FakeLLMResponse

pytestmark = pytest.mark.unit

OPEN_FORM = "I need to fill in a form."
TO_BILLING = "Put me through to billing."


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.form: FormTask | None = None
        self.tool_results: list[str | ToolError] = []
        self.returned = asyncio.Event()
        self.exited = asyncio.Event()
        self.tool_task: asyncio.Task[object] | None = None

    async def on_exit(self) -> None:
        self.exited.set()

    @function_tool
    async def open_form(self) -> str:
        """Collect the caller's form."""
        self.tool_task = asyncio.current_task()
        self.form = FormTask()
        try:
            answer = await self.form
        except ToolError as e:
            self.tool_results.append(e)
            raise
        finally:
            self.returned.set()
        self.tool_results.append(answer)
        return answer


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are billing.")
        self.current_on_enter: Agent | None = None

    async def on_enter(self) -> None:
        self.current_on_enter = self.session.current_agent


class FormTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="You collect the form.")
        self.billing = Billing()
        self.current_on_exit: Agent | None = None

    async def on_exit(self) -> None:
        self.current_on_exit = self.session.current_agent

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to billing."""
        return self.billing


def _respond(text: str, call: FunctionToolCall) -> FakeLLMResponse:
    return FakeLLMResponse(input=text, content="", ttft=0, duration=0, tool_calls=[call])


async def _bounded(ev: asyncio.Event) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(ev.wait(), timeout=5)


async def test_handoff_from_a_task_to_another_agent_closes_the_suspended_one() -> None:
    fake_llm = FakeLLM(
        fake_responses=[
            _respond(OPEN_FORM, FunctionToolCall(name="open_form", arguments="{}", call_id="c1")),
            _respond(TO_BILLING, FunctionToolCall(name="to_billing", arguments="{}", call_id="c2")),
        ]
    )
    desk = Desk()
    session = AgentSession(llm=fake_llm)
    await session.start(desk)
    try:
        await asyncio.wait_for(session.run(user_input=OPEN_FORM), timeout=5)
        form = desk.form
        assert isinstance(session.current_agent, FormTask) and form is not None

        await asyncio.wait_for(session.run(user_input=TO_BILLING), timeout=5)
        await _bounded(desk.returned)
        await _bounded(desk.exited)

        # billing takes over, and the desk the task suspended gets its tool's output and leaves
        assert session.current_agent is form.billing
        assert desk.returned.is_set(), "the desk's open_form never returned"
        assert len(desk.tool_results) == 1 and isinstance(desk.tool_results[0], ToolError)
        assert desk.exited.is_set(), "the desk never left"
        assert form.current_on_exit is form.billing
        assert form.billing.current_on_enter is form.billing
        # the desk's call is answered in the history with that error
        outputs = {i.call_id: i for i in session.history.items if i.type == "function_call_output"}
        assert outputs["c1"].is_error
    except BaseException:
        await _unwedge(session, desk)
        raise
    await asyncio.wait_for(session.aclose(), timeout=5)


async def _unwedge(session: AgentSession, desk: Desk) -> None:
    """Where the desk is left behind, its tool waits for ever and the session cannot close:
    run the task again and complete it while it is the current agent, so the desk resumes
    and the failure reported is the assertion, not the leftover tasks."""
    form = desk.form
    if form is not None and desk.tool_task is not None and not desk.tool_task.done():
        if session.current_agent is not form:
            with contextlib.suppress(RuntimeError):
                session.update_agent(form)
        if not form.done():
            form.complete("unwedged")
        else:
            desk.tool_task.cancel()
        await asyncio.wait({desk.tool_task}, timeout=5)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(session.aclose(), timeout=5)
