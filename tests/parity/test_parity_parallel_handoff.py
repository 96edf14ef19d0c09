"""Parity: one generation calls a plain tool and a handoff tool in parallel (patch 0001).

Stock 1.8.9 asks the leaving agent for one more reply with the batch's results, so the plain
tool's result is voiced (after the leaving agent's ``on_exit`` on the text path, which 0001
rightly stops). What must survive the patch: the sibling's result is not lost. It is voiced by
some agent, or the arriving agent has it in its context when it answers next. Covered for an
arriving agent with a context of its own (``NewAgent()``) and with the leaving agent's
(``NewAgent(chat_ctx=self.chat_ctx)``), on the pipeline LLM, on realtime sessions reused and
replaced across the handoff.

Not here: a model with Gemini's capabilities (automatic tool replies). Stock loses the sibling's
result there whatever the arriving agent's context (the leaving activity discards the model's
automatic reply and the arriving agent's context was copied before the outputs existed), so
there is no stock behaviour to keep.
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, function_tool

from tests import fakes
from tests.fakes import (
    JournalingAgent,
    LLMCall,
    MakeSession,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    bounded,
    scripted_model,
    spoken,
    tool_call,
)
from tests.parity._support import assert_every_call_answered, outputs_in, transcript

TRIAGE = "You are the triage agent."
SECONDARY = "You are the secondary agent."
SAVED = "Saved: x"
LEAVING_REPLY = "I saved it, transferring you now."
ARRIVING_REPLY = "Secondary agent here."
RUN_BOUND = 5.0


class Secondary(JournalingAgent):
    def __init__(self, journal: fakes.Journal, chat_ctx: Any = None) -> None:
        super().__init__(journal, name="secondary", instructions=SECONDARY, chat_ctx=chat_ctx)


class Triage(JournalingAgent):
    def __init__(self, journal: fakes.Journal, *, shared: bool) -> None:
        super().__init__(journal, name="triage", instructions=TRIAGE)
        self.shared = shared
        self.secondary: Secondary | None = None

    @function_tool
    async def save_data(self, value: str) -> str:
        """Save a value."""
        return f"Saved: {value}"

    @function_tool
    async def switch_to_secondary(self) -> Agent:
        """Hand the conversation to the secondary agent."""
        self.secondary = Secondary(self.journal, self.chat_ctx if self.shared else None)
        return self.secondary


def by_agent(call: LLMCall | RTGeneration) -> str:
    return ARRIVING_REPLY if call.instructions == SECONDARY else LEAVING_REPLY


def build_model(kind: str, order: tuple[str, ...]) -> ScriptedLLM | ScriptedRealtimeModel:
    calls = [tool_call(n, {"value": "x"} if n == "save_data" else {}) for n in order]
    return scripted_model(kind, [Reply(tool_calls=calls)], fallback=by_agent)


def requests(model: ScriptedLLM | ScriptedRealtimeModel) -> list[LLMCall | RTGeneration]:
    return list(model.calls if isinstance(model, ScriptedLLM) else model.generations)


ORDERS = pytest.mark.parametrize(
    "order", [("save_data", "switch_to_secondary"), ("switch_to_secondary", "save_data")], ids="-".join
)
KINDS = ["pipeline", "realtime-reused", "realtime-replaced"]


async def sibling_result_survives(
    make_session: MakeSession, kind: str, order: tuple[str, ...], shared: bool
) -> None:
    journal = fakes.Journal()
    triage = Triage(journal, shared=shared)
    model = build_model(kind, order)
    session = await make_session(triage, llm=model)
    await bounded(session.run(user_input="save x and move me on"), timeout=RUN_BOUND, what="handoff run")
    assert session.current_agent is triage.secondary
    await bounded(session.run(user_input="what did you save?"), timeout=RUN_BOUND, what="next turn")
    assert session.current_agent is triage.secondary
    assert_every_call_answered(session)

    save_id = next(
        i.call_id for i in session.history.items if i.type == "function_call" and i.name == "save_data"
    )
    reqs = requests(model)
    # voiced: a reply made with the result in its context said something that was spoken
    voiced = [
        r
        for r in reqs
        if save_id in outputs_in(r.chat_ctx)
        and r.reply is not None
        and r.reply.full_text
        and r.reply.full_text in spoken(session)
    ]
    # or known to the agent that answers the next turn
    arriving = [r for r in reqs if r.instructions == SECONDARY]
    assert arriving, transcript(session)
    known = save_id in outputs_in(arriving[-1].chat_ctx)
    assert voiced or known, (
        f"the result of save_data ({SAVED!r}) was neither voiced nor given to the arriving agent: "
        f"{transcript(session)}"
    )


@ORDERS
@pytest.mark.parametrize("kind", KINDS)
async def test_sibling_result_survives_a_handoff_to_a_shared_context(
    make_session: MakeSession, kind: str, order: tuple[str, ...]
) -> None:
    await sibling_result_survives(make_session, kind, order, shared=True)


@ORDERS
@pytest.mark.parametrize("kind", KINDS)
async def test_sibling_result_survives_a_handoff_to_a_fresh_context(
    make_session: MakeSession, kind: str, order: tuple[str, ...]
) -> None:
    await sibling_result_survives(make_session, kind, order, shared=False)
