"""Guard (passes on stock 1.8.9 and on the fork): the agent a tool hands off to was built
before the conversation, on a seed context it shares with the desk (what the app knows of the
caller, given to every agent as ``chat_ctx=``: a common pattern).

Billing was not built from the desk's context, it carries no conversation on: its model
answers with its own context (the seed), as on stock, not with everything the caller told the
desk (say, a card number the caller gave the desk to be verified there). The carry of the
batch that handed off (``_carry_over_tool_items()``) keys on the items the two contexts share,
and the seed is one: the conversation the desk had after the seed must not come with it.
"""

from __future__ import annotations

from typing import Any

from livekit.agents import Agent, ChatContext, function_tool

from tests import fakes
from tests.fakes import JournalingAgent, LLMCall, MakeSession, Reply, ScriptedLLM, bounded, tool_call
from tests.fakes.session import settled_on

DESK = "You are the front desk."
BILLING = "You are the billing desk."
SEED = "The caller is a premium customer."
CARD = "My card number is 4242."
TO_BILLING = "Put me through to billing."
REFUND = "I want a refund."


class Desk(JournalingAgent):
    def __init__(self, journal: fakes.Journal, billing: Agent, seed: ChatContext) -> None:
        super().__init__(journal, name="desk", instructions=DESK, chat_ctx=seed)
        self.billing = billing

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        return self.billing


async def test_an_agent_built_on_a_shared_seed_context_gets_not_the_desks_conversation(
    make_session: MakeSession,
) -> None:
    journal = fakes.Journal()
    seed = ChatContext()
    seed.add_message(role="assistant", content=SEED)
    billing = JournalingAgent(journal, name="billing", instructions=BILLING, chat_ctx=seed)
    seen: list[tuple[str | None, list[str]]] = []

    def answer(call: LLMCall) -> Reply:
        said = [i.text_content or "" for i in call.chat_ctx.items if i.type == "message" and i.role == "user"]
        seen.append((call.instructions, said))
        if call.instructions == DESK and call.last_user_text == TO_BILLING and call.tool_choice != "none":
            if not any(i.type == "function_call_output" for i in call.chat_ctx.items):
                return Reply(tool_calls=[tool_call("to_billing")])
        return Reply(f"{call.instructions} answers: {call.last_user_text}")

    session = await make_session(Desk(journal, billing, seed), llm=ScriptedLLM([], fallback=answer))
    await bounded(session.run(user_input=CARD), what="the desk's answer")
    await bounded(session.run(user_input=TO_BILLING), what="the handoff")
    await settled_on(session, billing)
    await bounded(session.run(user_input=REFUND), what="billing's answer")

    billing_calls: list[Any] = [users for instructions, users in seen if instructions == BILLING]
    assert billing_calls, seen
    # billing's model knows what billing was told, not the desk's conversation
    assert all(CARD not in users for users in billing_calls), seen
    assert journal.events == ["enter desk", "exit desk", "enter billing"]
