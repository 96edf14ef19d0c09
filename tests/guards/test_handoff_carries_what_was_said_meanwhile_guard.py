"""Guard (passes on stock 1.8.9 and on the fork): the caller speaks again while the tool that
hands off runs.

The front desk's tool takes a while. Meanwhile the caller says something else, and the desk's
model answers it; the tool builds billing with the desk's context (it carries the conversation
on, as documented: ``NewAgent(chat_ctx=self.chat_ctx)``) after the turn was heard, before the
answer was said, and returns it once the answer was said. The model answers tool results itself
(``auto_tool_reply_generation``). Stock never gives billing the batch that handed off, so
billing's model has nothing to reply to. The fork gives it the batch; billing's context must
then hold what the desk said since the copy too, or its model reads the caller's turn as open
and answers it a second time (seed 1050 of the audio stress, shrunk).
"""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import Agent, RunContext, function_tool

from tests import fakes
from tests.fakes import (
    Gate,
    JournalingAgent,
    MakeSession,
    Reply,
    RTGeneration,
    bounded,
    spoken,
    unanswered_calls,
    wait_for_event,
)
from tests.fakes.desks import desk_realtime_model
from tests.fakes.session import settled_on

DESK = "You are the front desk."
BILLING = "You are the billing desk."
TO_BILLING = "Put me through to billing."
MEANWHILE = "And my address changed."


def answer(gen: RTGeneration) -> str:
    """Like a model: the last message of the context is the caller's, open, or an answer."""
    said = [i for i in gen.chat_ctx.items if i.type == "message" and i.role in ("user", "assistant")]
    if said and said[-1].role == "user":
        return f"{gen.instructions} answers: {said[-1].text_content}"
    return f"{gen.instructions} follows up"


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, gate: Gate) -> None:
        super().__init__(journal, name="desk", instructions=DESK)
        self.gate = gate
        self.returns = Gate("to_billing returns")
        self.billing: Agent | None = None

    @function_tool
    async def to_billing(self, ctx: RunContext) -> Agent:
        """Put the caller through to the billing desk."""
        await self.gate.wait()
        billing = self.billing = JournalingAgent(
            self.journal, name="billing", instructions=BILLING, chat_ctx=self.chat_ctx
        )
        await self.returns.wait()
        return billing


@pytest.mark.parametrize("reuse", [False, True], ids=["replaced", "reused"])
async def test_the_agent_taking_over_does_not_answer_again_what_was_answered_while_the_tool_ran(
    make_session: MakeSession, reuse: bool
) -> None:
    journal = fakes.Journal()
    gate = Gate("to_billing")
    model = desk_realtime_model(answer, reuse=reuse, auto_tool_reply_generation=True)
    desk = Desk(journal, gate)
    session = await make_session(desk, llm=model)
    rt = model.sessions[-1]
    rt.simulate_user_turn(TO_BILLING)
    async with gate.held():

        async def tool_in_background() -> None:
            # the desk's reply is over, its tool runs on: the caller's turn interrupts nothing
            while session.current_speech is not None:  # noqa: ASYNC110 (no event says it; yields, no timing)
                await asyncio.sleep(0)

        await bounded(tool_in_background(), what="the desk's reply to end")
        # the caller speaks again; the desk's model answers, a little slowly
        reply = Gate("the desk's answer")
        rt.simulate_user_turn(MEANWHILE, reply=Reply(f"{DESK} answers: {MEANWHILE}", hold=reply))
        await reply.reached()
    # the tool builds billing now: the caller's turn is in the desk's context, its answer not yet
    await desk.returns.reached()
    said = asyncio.ensure_future(
        wait_for_event(
            session,
            "conversation_item_added",
            lambda ev: ev.item.type == "message" and ev.item.text_content == f"{DESK} answers: {MEANWHILE}",
        )
    )
    reply.open()
    await bounded(said, what="the desk's answer said")
    desk.returns.open()
    await bounded(journal.entered["billing"].wait(), what="billing's on_enter")
    assert desk.billing is not None
    await settled_on(session, desk.billing)

    assert unanswered_calls(session) == []
    # the fork's defect: billing's reply to the batch it carried answers the turn again
    answers = [t for t in spoken(session) if t.endswith(f"answers: {MEANWHILE}")]
    assert answers == [f"{DESK} answers: {MEANWHILE}"], spoken(session)
