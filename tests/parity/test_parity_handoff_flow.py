"""Parity: handoff flow around patches 0005, 0008, 0009 and 0015 (``update_agent()``,
``_update_activity()``, the arriving activity's scheduling).

What stock 1.8.9 gets right and must stay right, on the pipeline LLM and on realtime sessions
reused and replaced across the handoff: a reply the leaving agent asks for in its own
``on_exit`` (a goodbye) and one the arriving agent asks for in ``on_enter`` (a greeting) are
both voiced, in that order, each by its own agent; back-to-back ``update_agent()`` calls and
one made from an arriving agent's ``on_enter`` end on the last agent, which answers the next
turn; an arriving agent built with a fresh context does not see the leaving agent's
conversation, one built with ``chat_ctx=self.chat_ctx`` does.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, function_tool

from tests import fakes
from tests.fakes import (
    JournalingAgent,
    MakeSession,
    Reply,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    scripted_model,
    spoken,
    tool_call,
)
from tests.parity._support import assert_every_call_answered, transcript

KINDS = pytest.mark.parametrize("kind", ["pipeline", "realtime-reused", "realtime-replaced"])
A, B, C = "You are agent A.", "You are agent B.", "You are agent C."
REPLIES = {A: "A speaking.", B: "B speaking.", C: "C speaking."}
GOODBYE, GREETING = "say goodbye", "greet the caller"


def by_agent(call: Any) -> str:
    """Each agent answers in its own voice; a goodbye or greeting says so."""
    extra = getattr(call, "extra_instructions", None) or (
        call.system_texts[-1] if hasattr(call, "system_texts") else ""
    )
    name = {A: "A", B: "B", C: "C"}.get(call.instructions or "", "?")
    if GOODBYE in (extra or ""):
        return f"Goodbye from {name}."
    if GREETING in (extra or ""):
        return f"Hello from {name}."
    return REPLIES.get(call.instructions or "", "")


def requests(model: ScriptedLLM | ScriptedRealtimeModel) -> list[Any]:
    return list(model.calls if isinstance(model, ScriptedLLM) else model.generations)


class Polite(JournalingAgent):
    """Says goodbye from on_exit and hello from on_enter, when asked to."""

    def __init__(
        self, journal: fakes.Journal, *, name: str, instructions: str, polite: bool = False, **kw: Any
    ):
        super().__init__(journal, name=name, instructions=instructions, **kw)
        self.polite = polite
        self.next: Agent | None = None
        self.then: Agent | None = None

    async def on_enter(self) -> None:
        await super().on_enter()
        if self.then is not None:
            self.session.update_agent(self.then)
        elif self.polite:
            self.session.generate_reply(instructions=GREETING)

    async def on_exit(self) -> None:
        await super().on_exit()
        if self.polite:
            await self.session.generate_reply(instructions=GOODBYE)

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer the caller."""
        assert self.next is not None
        return self.next


@KINDS
async def test_goodbye_from_on_exit_then_greeting_from_on_enter(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    a = Polite(journal, name="a", instructions=A, polite=True)
    b = Polite(journal, name="b", instructions=B, polite=True)
    a.next = b
    model = scripted_model(kind, [Reply(tool_calls=[tool_call("transfer")])], fallback=by_agent)
    session = await make_session(a, llm=model)
    await bounded(journal.entered["a"].wait(), what="a entered")
    await bounded(session.run(user_input="transfer me"), what="handoff run")
    await bounded(session.run(user_input="hi"), what="next turn")

    assert session.current_agent is b
    said = spoken(session)
    assert said[-1] == "B speaking.", transcript(session)
    assert "Goodbye from A." in said and "Hello from B." in said, transcript(session)
    assert said.index("Goodbye from A.") < said.index("Hello from B."), said
    # each was asked of its own agent
    reqs = requests(model)
    assert [r.instructions for r in reqs if "Goodbye" in (r.reply.full_text if r.reply else "")] == [A]
    assert [r.instructions for r in reqs if "Hello" in (r.reply.full_text if r.reply else "")] == [B]
    assert_every_call_answered(session)


@KINDS
async def test_back_to_back_update_agent_ends_on_the_last(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    a = Polite(journal, name="a", instructions=A)
    b = Polite(journal, name="b", instructions=B)
    c = Polite(journal, name="c", instructions=C)
    model = scripted_model(kind, fallback=by_agent)
    session = await make_session(a, llm=model)
    session.update_agent(b)
    session.update_agent(c)
    await bounded(journal.entered["c"].wait(), what="c entered")
    await bounded(session.run(user_input="hello"), what="next turn")

    assert session.current_agent is c
    assert journal.events[-1] == "enter c" and journal.events.count("enter c") == 1, journal.events
    assert journal.events.count("exit a") == 1 and "exit c" not in journal.events, journal.events
    assert spoken(session) == ["C speaking."], transcript(session)
    assert [r.instructions for r in requests(model)] == [C]


@KINDS
async def test_update_agent_from_on_enter_ends_on_the_next(make_session: MakeSession, kind: str) -> None:
    journal = fakes.Journal()
    a = Polite(journal, name="a", instructions=A)
    b = Polite(journal, name="b", instructions=B)
    c = Polite(journal, name="c", instructions=C)
    a.next, b.then = b, c
    model = scripted_model(kind, [Reply(tool_calls=[tool_call("transfer")])], fallback=by_agent)
    session = await make_session(a, llm=model)
    await bounded(session.run(user_input="transfer me"), what="handoff run")
    await bounded(journal.entered["c"].wait(), what="c entered")
    await bounded(session.run(user_input="hello"), what="next turn")

    assert session.current_agent is c
    assert journal.events == ["enter a", "exit a", "enter b", "exit b", "enter c"]
    assert spoken(session)[-1] == "C speaking."
    assert [r.instructions for r in requests(model)] == [A, C]
    assert_every_call_answered(session)


@KINDS
@pytest.mark.parametrize("context", ["fresh", "shared"])
async def test_arriving_agent_context(make_session: MakeSession, kind: str, context: str) -> None:
    journal = fakes.Journal()

    class Front(Polite):
        @function_tool
        async def transfer(self) -> Agent:
            """Transfer the caller."""
            chat_ctx = self.chat_ctx if context == "shared" else None
            self.next = Polite(journal, name="b", instructions=B, chat_ctx=chat_ctx)
            return self.next

    a = Front(journal, name="a", instructions=A)
    model = scripted_model(
        kind, [Reply(text="Let me check.", tool_calls=[tool_call("transfer")])], fallback=by_agent
    )
    session = await make_session(a, llm=model)
    await bounded(session.run(user_input="my name is Ada, transfer me"), what="handoff run")
    await bounded(session.run(user_input="what is my name?"), what="next turn")

    assert session.current_agent is a.next
    first_b = next(r for r in requests(model) if r.instructions == B)
    users = [i.text_content for i in first_b.chat_ctx.items if i.type == "message" and i.role == "user"]
    if context == "shared":
        assert "my name is Ada, transfer me" in users, users
    else:
        assert "my name is Ada, transfer me" not in users, users
    assert spoken(session)[-1] == "B speaking."
    # the session's history keeps the whole conversation either way
    assert [i.text_content for i in session.history.items if i.type == "message" and i.role == "user"] == [
        "my name is Ada, transfer me",
        "what is my name?",
    ]
    assert_every_call_answered(session)
