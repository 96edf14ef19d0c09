"""Recording a tool call does not read the whole session history.

The session records each tool call and its output in its history with
``ChatContext._upsert_item()``, which upstream looks up with ``index_by_id()``: a scan from the
first item of the conversation. Every tool call reads every earlier item of the session two or
three times, so each turn is a little slower than the one before (``benchmarks/long_run.py``
measures it: the last of 1,000 handoffs against the first). No wall clock here: the test counts
how many earlier history items a turn with a tool call reads, on a history of a few hundred and
of a few thousand items. The lookup must stay right, too (tests/guards/test_chat_context_upsert_guard.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from livekit.agents import Agent, RunResult, function_tool, llm
from livekit.agents.llm import chat_context

from tests.fakes import LLMCall, MakeSession, Reply, ScriptedLLM, bounded, tool_call

BUG = pytest.mark.upstream_bug(
    "not-yet: each tool call scans the whole session history, every turn slower than the one before"
)

ID_READS = [0]


class CountedMessage(llm.ChatMessage):
    """An earlier message of the conversation that counts the reads of its ``id``."""

    def __getattribute__(self, name: str) -> Any:
        if name == "id":
            ID_READS[0] += 1
        return super().__getattribute__(name)


CountedMessage.model_rebuild(_types_namespace=vars(chat_context))  # its fields' types live there


class Clerk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You look things up.")

    @function_tool
    async def lookup(self) -> str:
        """Look something up."""
        return "found"


def tool_then_answer(call: LLMCall) -> Reply | str:
    last = call.chat_ctx.items[-1]
    return "Here it is." if last.type == "function_call_output" else Reply(tool_calls=[tool_call("lookup")])


@BUG
@pytest.mark.parametrize("earlier", [300, 3000])
async def test_a_tool_call_turn_does_not_read_the_earlier_history(
    make_session: MakeSession, earlier: int
) -> None:
    fake = ScriptedLLM(fallback=tool_then_answer)
    session = await make_session(Clerk(), llm=fake)
    # a long conversation already in the session's history (stamped long before this one)
    session.history.insert(
        [
            CountedMessage(role="user", content=[f"earlier {n}"], created_at=float(n + 1))
            for n in range(earlier)
        ]
    )

    turns: list[RunResult[Any]] = []
    reads: list[int] = []
    for n in range(3):
        ID_READS[0] = 0
        turns.append(await bounded(session.run(user_input=f"Look it up ({n})."), what=f"turn {n}"))
        reads.append(ID_READS[0])

    for result in turns:
        result.expect.contains_function_call(name="lookup")
    recorded = [i for i in session.history.items if i.type in ("function_call", "function_call_output")]
    assert len(recorded) == 6, recorded  # each call and output once
    ids = [i.id for i in session.history.items]
    assert len(ids) == len(set(ids)), "an item is in the history twice"

    # the first lookup may read the history once; later turns read none of it
    assert reads[1:] == [0, 0], (
        f"each later turn read the ID of earlier history items {reads[1:]} times (of {earlier} "
        "items): recording its tool call scanned the whole history"
    )
    assert reads[0] <= earlier, reads
