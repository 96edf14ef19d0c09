"""The ``leaving_agent_silent`` check, the Nova mode's two checks and the audio mode's two checks of
spoken turns (``no_lost_user_turn``, ``answered_by_current_agent``), on hand-written journals.

The harness itself can only show that a build passes; these pin down what the check counts as
the #5150 failure (the agent a handoff of its own batch took out goes on to answer that batch)
and what it leaves to the drain order every speech in flight follows (a bystander's reply with
another agent's results in its context; the in-flight reply of an agent that an unrelated
handoff took out first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from livekit.agents import llm

from tests.fakes import Reply, tool_call
from tests.stress.invariants import (
    Generation,
    Probe,
    SpokenJournal,
    TurnRequest,
    check_answering_agent,
    check_late_generations,
    check_spoken_turns,
)


@dataclass
class _Agent:
    id: str


def _generation(
    probe: Probe,
    agent: str,
    answered: tuple[str, ...],
    *,
    voices: bool = False,
    speech: str | None = None,
) -> None:
    probe.generations.append(
        Generation(
            seq=probe._next(),
            agent=agent,
            what="realtime generate_reply",
            speech=speech or f"speech_{agent}",
            answered=answered,
            voices_handoff=voices,
        )
    )


def _exit(probe: Probe, agent: str) -> None:
    probe.agent_event(_Agent(agent), "exit")  # type: ignore[arg-type]
    probe.agent_event(_Agent(agent), "exited")  # type: ignore[arg-type]


def _enter(probe: Probe, agent: str) -> None:
    probe.agent_event(_Agent(agent), "enter")  # type: ignore[arg-type]
    probe.agent_event(_Agent(agent), "entered")  # type: ignore[arg-type]


def _batch(probe: Probe, issuer: str, *call_ids: str) -> None:
    """The issuer's speech (created now, before any on_exit) calls these tools."""
    probe.speech_created(f"speech_{issuer}")
    probe.issued.update(dict.fromkeys(call_ids, issuer))


def _agent_0_calls(*call_ids: str, handing_off: str, to: str) -> Probe:
    """A journal in which agent_0 entered and issued ``call_ids``; ``handing_off`` returned ``to``."""
    probe = Probe()
    _enter(probe, "agent_0")
    _batch(probe, "agent_0", *call_ids)
    probe.handoff_calls[handing_off] = to
    probe.carries_on.add(to)  # built with agent_0's context: it carries the conversation on
    return probe


def _names(probe: Probe) -> list[str]:
    return [v.invariant for v in check_late_generations(probe)]


def test_own_batch_answered_after_its_handoff_took_the_agent_out() -> None:
    probe = _agent_0_calls("c0_0", "c0_1", handing_off="c0_0", to="agent_1")
    _exit(probe, "agent_0")
    _generation(probe, "agent_0", ("c0_0", "c0_1"))
    _enter(probe, "agent_1")

    assert _names(probe) == ["leaving_agent_silent"]


def test_a_queued_reply_that_starts_after_on_exit_counts_even_across_speeches() -> None:
    # Nova Sonic: one completion's two calls are two speeches; the reply to the first call's
    # async result was queued before the leaving agent's on_exit began and asks the model
    # only after it, with the sibling's handoff at the end of its context. Nothing of it had
    # started: the leaving agent starts speaking after its on_exit, so it counts
    probe = _agent_0_calls("c0_0", "c0_1", handing_off="c0_1", to="agent_1")
    probe.speech_created("speech_delivery")  # queued before on_exit
    _exit(probe, "agent_0")
    _generation(probe, "agent_0", ("c0_1",), speech="speech_delivery")
    _enter(probe, "agent_1")

    assert _names(probe) == ["leaving_agent_silent"]


def test_an_agent_that_starts_afresh_leaves_the_batch_to_the_leaving_one() -> None:
    probe = _agent_0_calls("c0_0", "c0_1", handing_off="c0_0", to="agent_1")
    probe.carries_on.clear()  # agent_1 was built without agent_0's context
    _exit(probe, "agent_0")
    _generation(probe, "agent_0", ("c0_0", "c0_1"))
    _enter(probe, "agent_1")

    assert _names(probe) == []


def test_deferred_return_of_own_batch_counts_too() -> None:
    probe = _agent_0_calls("c0_0", handing_off="c0_0_final", to="agent_1")
    _exit(probe, "agent_0")
    _generation(probe, "agent_0", ("c0_0", "c0_0_final"))
    _enter(probe, "agent_1")

    assert _names(probe) == ["leaving_agent_silent"]


def test_voicing_the_handoff_message_is_allowed() -> None:
    probe = _agent_0_calls("c0_0", "c0_1", handing_off="c0_0", to="agent_1")
    _exit(probe, "agent_0")
    _generation(probe, "agent_0", ("c0_0", "c0_1"), voices=True)
    _enter(probe, "agent_1")

    assert _names(probe) == []


def test_answering_before_on_exit_is_allowed() -> None:
    probe = _agent_0_calls("c0_0", "c0_1", handing_off="c0_0", to="agent_1")
    _generation(probe, "agent_0", ("c0_0", "c0_1"))
    _exit(probe, "agent_0")
    _enter(probe, "agent_1")

    assert _names(probe) == []


def test_a_bystander_with_another_agents_results_in_context_is_not_counted() -> None:
    # agent_1 arrived by update_agent() while agent_0's session-scoped tool returned agent_2:
    # the result went to agent_1, the current agent, and agent_1's queued greeting runs on
    # after another handoff took it out
    probe = _agent_0_calls("c0_1", handing_off="c0_1_final", to="agent_2")
    _exit(probe, "agent_0")
    _enter(probe, "agent_1")
    probe.speech_created("speech_agent_1")  # its greeting, asked for in on_enter
    _exit(probe, "agent_1")
    _generation(probe, "agent_1", ("c0_1_final",))
    _enter(probe, "agent_2")

    assert _names(probe) == []


def test_own_reply_after_an_unrelated_handoff_took_the_agent_out_is_not_counted() -> None:
    # update_agent(agent_2) from outside drained agent_0 while its reply to a progress
    # update was in flight; the deferred return (agent_1) hands off from agent_2 later
    probe = _agent_0_calls("c0_0", handing_off="c0_0_final", to="agent_1")
    _exit(probe, "agent_0")
    _generation(probe, "agent_0", ("c0_0", "c0_0_final"))
    _enter(probe, "agent_2")
    _exit(probe, "agent_2")
    _enter(probe, "agent_1")

    assert _names(probe) == []


# -- the Nova mode's own checks (tests/stress/nova.py), on hand-made connections and histories --


def _nova() -> Any:
    return pytest.importorskip("tests.stress.nova")


def _connection(server: Any, *issued: str) -> Any:
    """A connection of ``server`` whose server side issued ``issued`` (one toolUse each)."""
    from tests.fakes.bedrock_stream import BedrockConnection, tool_use

    conn = BedrockConnection(index=len(server.connections), model_id="nova", server=server)
    server.connections.append(conn)
    for call_id in issued:
        conn.push(tool_use(call_id, "tool_0"))
    return conn


def _send(conn: Any, kind: str, content: str, *, tool_use_id: str | None = None) -> None:
    """What the plugin sends: a TEXT block, or a toolResult block for ``tool_use_id``."""
    name = f"content-{len(conn.sent) + len(conn.sent_after_close)}"
    start: dict[str, Any] = {"contentName": name, "type": kind}
    if tool_use_id is not None:
        start["toolResultInputConfiguration"] = {"toolUseId": tool_use_id}
    body = "toolResult" if tool_use_id is not None else "textInput"
    for event in (
        {"contentStart": start},
        {body: {"contentName": name, "content": content}},
        {"contentEnd": {"contentName": name}},
    ):
        conn._record({"event": event})


def _outputs(*call_ids: str) -> list[Any]:
    from livekit.agents import llm

    return [
        llm.FunctionCallOutput(call_id=c, name="tool_0", output=f"out {c}", is_error=False) for c in call_ids
    ]


def _reached(items: list[Any], connections: list[Any], closed_at: float | None = None) -> list[str]:
    return [v.detail.split()[0] for v in _nova().check_tool_outputs(items, connections, closed_at)]


def test_a_tool_output_no_connection_was_sent_is_counted() -> None:
    from tests.fakes.bedrock_stream import FakeBedrock

    server = FakeBedrock()
    conn = _connection(server, "c0_0", "c0_1")
    _send(conn, "TOOL", "out c0_0", tool_use_id="c0_0")

    assert _reached(_outputs("c0_0", "c0_1"), server.connections) == ["c0_1"]


def test_a_tool_result_on_a_connection_that_did_not_issue_the_call_is_counted() -> None:
    from tests.fakes.bedrock_stream import FakeBedrock

    server = FakeBedrock()
    _connection(server, "c0_0")
    later = _connection(server)
    _send(later, "TOOL", "out c0_0", tool_use_id="c0_0")

    assert _reached(_outputs("c0_0"), server.connections) == ["c0_0"]
    # and the fake flags the toolResult itself
    assert [v.invariant for v in _nova().check_protocol(server)] == ["bedrock_protocol"]


def test_the_plugins_tool_result_text_on_any_connection_counts_as_reached() -> None:
    from tests.fakes.bedrock_stream import FakeBedrock

    server = FakeBedrock()
    _connection(server, "c0_0")
    later = _connection(server)
    marked = (
        "[Result of the tool call tool_0 (call id c0_0_final). This is a tool result, not the user speaking.]"
    )
    _send(later, "TEXT", f"{marked}\nout c0_0_final")
    _send(later, "TEXT", "the user says (call id c0_0_update_1)")  # not the plugin's tool-result text

    assert _reached(_outputs("c0_0_final", "c0_0_update_1"), server.connections) == ["c0_0_update_1"]


def test_an_output_made_after_aclose_started_is_not_counted() -> None:
    from tests.fakes.bedrock_stream import FakeBedrock

    server = FakeBedrock()
    _connection(server, "c0_0")
    late = _outputs("c0_0")
    closed_at = late[0].created_at - 1.0

    assert _reached(late, server.connections, closed_at) == []
    assert _reached(late, server.connections, closed_at + 2.0) == ["c0_0"]


def test_an_output_no_stream_of_its_holders_could_carry_before_the_close_is_not_counted() -> None:
    from tests.fakes.bedrock_stream import FakeBedrock

    server = FakeBedrock()
    parent = _connection(server, "c0_0")
    _send(parent, "TEXT", "You are agent_0.")
    (out,) = _outputs("c0_0")
    closed_at = out.created_at + 60.0

    def held_by(*names: str) -> Any:
        return lambda item_id: set(names) if item_id == out.id else set()

    def reached(holders: Any) -> list[str]:
        return [
            v.detail.split()[0]
            for v in _nova().check_tool_outputs([out], server.connections, closed_at, holders)
        ]

    # given to a task whose session never connected before the session closed: nothing could carry it
    assert reached(held_by("task_t0s0")) == []
    # the agent holding it had its stream open then: it is owed
    assert reached(held_by("agent_0")) == ["c0_0"]
    assert reached(held_by("task_t0s0", "agent_0")) == ["c0_0"]
    # a stream of the task that opened before the close could have carried it
    task_conn = _connection(server)
    _send(task_conn, "TEXT", "You are task_t0s0.")
    assert reached(held_by("task_t0s0")) == ["c0_0"]
    # ... not one that ended before the output was made
    task_conn.ended_at = out.created_at - 0.001
    assert reached(held_by("task_t0s0")) == []
    # without the holders, or without a close, it is counted as before
    assert reached(None) == ["c0_0"]
    assert [
        v.detail.split()[0] for v in _nova().check_tool_outputs([out], server.connections, None, held_by("x"))
    ] == ["c0_0"]


def test_a_send_on_a_closed_stream_is_a_protocol_violation() -> None:
    from tests.fakes.bedrock_stream import FakeBedrock

    server = FakeBedrock()
    conn = _connection(server, "c0_0")
    _send(conn, "TOOL", "out c0_0", tool_use_id="c0_0")
    assert _nova().check_protocol(server) == []

    conn.input_closed = True
    _send(conn, "TEXT", "too late")

    violations = _nova().check_protocol(server)
    assert {v.invariant for v in violations} == {"bedrock_protocol"}
    assert "sent on a closed stream" in violations[0].detail


# -- spoken turns: no_lost_user_turn and answered_by_current_agent on hand-written journals --


def _spoken(*, hooks: bool = False) -> tuple[Probe, SpokenJournal]:
    probe = Probe()
    _enter(probe, "agent_0")
    return probe, SpokenJournal(probe, hooks=hooks)


def _say(journal: SpokenJournal, turn: int) -> None:
    """The caller speaks ``turn <turn>`` and the session emits its final transcript."""
    journal.speech_started[turn] = journal.probe._next()
    journal.finals[turn] = journal.probe._next()


def _request(journal: SpokenJournal, agent: str, *turns: int, speech: str | None = None) -> str:
    rid = f"r{journal.probe.seq}"
    if speech is not None:
        journal.probe.speech_created(speech)
    journal.requests.append(TurnRequest(journal.probe._next(), rid, agent, turns, speech))
    for t in turns:
        journal.heard.setdefault(t, []).append(agent)
    return rid


def _history(*entries: tuple[str, str]) -> list[llm.ChatItem]:
    """("user", "turn 0") for a user message, ("reply", rid) for the reply that played."""
    ctx = llm.ChatContext()
    for kind, text in entries:
        if kind == "user":
            ctx.add_message(role="user", content=text)
        else:
            ctx.add_message(role="assistant", content=f"answers ({text})", id=text)
    return ctx.items


def _lost(journal: SpokenJournal, items: list[llm.ChatItem]) -> list[str]:
    return [v.detail for v in check_spoken_turns(journal, items)]


def _who(journal: SpokenJournal, items: list[llm.ChatItem]) -> list[str]:
    return [v.detail for v in check_answering_agent(journal, items)]


def test_a_turn_answered_once_is_not_lost() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    rid = _request(journal, "agent_0", 0)

    assert _lost(journal, _history(("user", "turn 0"), ("reply", rid))) == []


def test_a_final_transcript_missing_from_the_history_is_lost() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    _request(journal, "agent_0", 0)

    assert _lost(journal, _history()) == ["turn 0: in 0 user messages of the history"]


def test_a_turn_recorded_twice_is_counted() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    rid = _request(journal, "agent_0", 0)

    assert _lost(journal, _history(("user", "turn 0"), ("user", "turn 0"), ("reply", rid))) == [
        "turn 0: in 2 user messages of the history"
    ]


def test_a_turn_recorded_and_never_answered_is_lost() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    _request(journal, "agent_0", 0)  # its reply never played

    assert _lost(journal, _history(("user", "turn 0"))) == ["turn 0: recorded, never answered"]


def test_a_turn_whose_reply_a_later_turn_cut_before_it_played_is_superseded() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    _request(journal, "agent_0", 0)  # interrupted by turn 1 before any of it played
    _say(journal, 1)
    rid = _request(journal, "agent_0", 1)

    assert _lost(journal, _history(("user", "turn 0"), ("user", "turn 1"), ("reply", rid))) == []


def test_a_later_turn_after_the_caller_waited_supersedes_nothing() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    journal.waits.append(journal.probe._next())  # the session settled with turn 0 unanswered
    _say(journal, 1)
    rid = _request(journal, "agent_0", 1)

    assert _lost(journal, _history(("user", "turn 0"), ("user", "turn 1"), ("reply", rid))) == [
        "turn 0: recorded, never answered"
    ]


def test_a_turn_the_closing_session_leaves_unanswered_is_not_lost() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    journal.closed_at = journal.probe._next()

    assert _lost(journal, _history(("user", "turn 0"))) == []


def test_a_turn_answered_twice_is_counted() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    first = _request(journal, "agent_0", 0)
    second = _request(journal, "agent_1", 0)

    assert _lost(journal, _history(("user", "turn 0"), ("reply", first), ("reply", second))) == [
        "turn 0: answered 2 times, by ['agent_0', 'agent_1']"
    ]


def _task_answers_with_calls(follow_up: str | None) -> tuple[SpokenJournal, list[llm.ChatItem]]:
    """agent_0 awaits task_1; the caller says turn 0 to the task, which answers it with a tool
    call, then completes; ``follow_up`` (if any) is what it said after its call. agent_0, the
    task's context merged without the call, answers turn 0 after the task completed."""
    _, journal = _spoken()
    _enter(journal.probe, "task_1")
    _say(journal, 0)
    calls = _request(journal, "task_1", 0)
    journal.completed_tasks["task_1"] = journal.probe._next()
    again = _request(journal, "agent_0", 0)
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="turn 0")
    ctx.insert(llm.FunctionCall(call_id=f"{calls}/0", name="handoff", arguments="{}"))
    ctx.insert(llm.FunctionCallOutput(call_id=f"{calls}/0", name="handoff", output="refused", is_error=True))
    if follow_up is not None:
        ctx.add_message(role="assistant", content=follow_up)
    ctx.add_message(role="assistant", content="agent_0 answers turn 0", id=again)
    return journal, list(ctx.items)


def test_a_completed_tasks_calls_the_caller_never_heard_followed_up_do_not_count_as_an_answer() -> None:
    # the task's reply to its call's output never played: the caller heard agent_0 alone
    journal, items = _task_answers_with_calls(None)
    assert _lost(journal, items) == []


@pytest.mark.parametrize("said", ["task_1 follows up turn 0", "task_1 answers turn 0"])
def test_a_turn_a_completed_task_spoke_to_and_its_caller_answers_again_is_counted(said: str) -> None:
    # the task's reply after its call played: the caller heard the turn answered twice
    journal, items = _task_answers_with_calls(said)
    assert _lost(journal, items) == ["turn 0: answered 2 times, by ['task_1', 'agent_0']"]


def test_calls_of_an_agent_that_is_no_completed_task_still_count_as_an_answer() -> None:
    # only an inline task's calls leave the agent it returns to without them: an agent whose
    # calls answered a turn that another agent answers again is counted, heard or not
    journal, items = _task_answers_with_calls(None)
    journal.completed_tasks.clear()
    assert _lost(journal, items) == ["turn 0: answered 2 times, by ['task_1', 'agent_0']"]


def test_a_completed_tasks_unheard_calls_count_when_nobody_else_answered_after_it() -> None:
    # the task's calls are its answer when no one answers the turn after it completed
    journal, items = _task_answers_with_calls(None)
    journal.requests = journal.requests[:1]
    assert _lost(journal, [i for i in items if i.type != "message" or i.role == "user"]) == []


def test_an_earlier_turn_answered_after_a_later_answered_turn_ended_is_counted() -> None:
    # two turns end during one handoff and the arriving agent answers both, one by one
    _, journal = _spoken()
    _say(journal, 0)
    _say(journal, 1)
    first = _request(journal, "agent_1", 0)
    second = _request(journal, "agent_1", 1)
    items = _history(("user", "turn 0"), ("user", "turn 1"), ("reply", first), ("reply", second))

    assert _lost(journal, items) == ["turn 0: agent_1 answered it after turn 1 ended (superseded)"]


def test_an_answer_asked_for_before_the_later_turn_ended_may_play() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    first = _request(journal, "agent_0", 0)
    _say(journal, 1)
    second = _request(journal, "agent_0", 1)
    items = _history(("user", "turn 0"), ("reply", first), ("user", "turn 1"), ("reply", second))

    assert _lost(journal, items) == []


def test_two_finals_in_one_user_turn_are_one_message() -> None:
    _, journal = _spoken()
    _say(journal, 0)
    _say(journal, 1)
    rid = _request(journal, "agent_0", 0, 1)

    assert _lost(journal, _history(("user", "turn 0 turn 1"), ("reply", rid))) == []


def test_the_current_agent_answering_is_allowed() -> None:
    _, journal = _spoken(hooks=True)
    _say(journal, 0)
    rid = _request(journal, "agent_0", 0)

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == []


def test_an_agent_answering_a_turn_after_its_on_exit_began_is_counted() -> None:
    probe, journal = _spoken()
    _say(journal, 0)
    _exit(probe, "agent_0")  # the session closes
    rid = _request(journal, "agent_0", 0, speech="speech_late")

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == [
        "turn 0: answered by agent_0 after its on_exit began"
    ]


def test_finishing_a_reply_whose_speech_was_created_before_on_exit_is_allowed() -> None:
    probe, journal = _spoken()
    _say(journal, 0)
    probe.speech_created("speech_0")
    _exit(probe, "agent_0")  # drain(): on_exit, then the queued speech runs
    rid = _request(journal, "agent_0", 0, speech="speech_0")

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == []


def test_a_turn_ending_during_a_handoff_answered_by_the_leaving_agent_is_counted() -> None:
    probe, journal = _spoken()
    journal.handoffs.append((probe._next(), "agent_1"))  # a tool returned agent_1
    _say(journal, 0)
    rid = _request(journal, "agent_0", 0, speech="speech_0")  # before on_exit, still live
    _exit(probe, "agent_0")
    _enter(probe, "agent_1")

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == [
        "turn 0: ended while handing off to agent_1, answered by agent_0"
    ]


def test_a_turn_ending_during_a_handoff_answered_by_the_arriving_agent_is_allowed() -> None:
    probe, journal = _spoken()
    journal.handoffs.append((probe._next(), "agent_1"))
    _say(journal, 0)
    _exit(probe, "agent_0")
    _enter(probe, "agent_1")
    rid = _request(journal, "agent_1", 0)

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == []


def _reply_first(journal: SpokenJournal, turn: int, *, handoff_first: bool) -> str:
    """A realtime turn the server answers before its transcript comes: the caller speaks, the
    leaving agent's model creates its reply (a tool returns agent_1 before or after that), then
    the final transcript; agent_0 answers it before its on_exit."""
    probe = journal.probe
    journal.speech_started[turn] = probe._next()
    if handoff_first:
        journal.handoffs.append((probe._next(), "agent_1"))
    probe.speech_created("speech_0")
    if not handoff_first:
        journal.handoffs.append((probe._next(), "agent_1"))
    rid = _request(journal, "agent_0", turn, speech="speech_0")
    journal.finals[turn] = probe._next()
    _exit(probe, "agent_0")
    _enter(probe, "agent_1")
    return rid


def test_a_realtime_reply_the_server_created_before_the_handoff_and_the_transcript_is_allowed() -> None:
    # the turn ended when the server answered it, before the tool returned agent_1
    probe, journal = _spoken()
    rid = _reply_first(journal, 0, handoff_first=False)

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == []


def test_a_realtime_reply_the_server_created_once_the_handoff_began_is_counted() -> None:
    probe, journal = _spoken()
    rid = _reply_first(journal, 0, handoff_first=True)

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == [
        "turn 0: ended while handing off to agent_1, answered by agent_0"
    ]


def test_an_earlier_speech_answering_a_realtime_turn_that_ended_during_a_handoff_is_counted() -> None:
    # the leaving agent's tool reply, of a speech created before the caller spoke the turn,
    # answers the turn: the turn ended with its transcript, during the handoff
    probe, journal = _spoken()
    probe.speech_created("speech_0")
    journal.handoffs.append((probe._next(), "agent_1"))
    journal.speech_started[1] = probe._next()
    rid = _request(journal, "agent_0", 1, speech="speech_0")
    journal.finals[1] = probe._next()
    _exit(probe, "agent_0")
    _enter(probe, "agent_1")

    assert _who(journal, _history(("user", "turn 1"), ("reply", rid))) == [
        "turn 1: ended while handing off to agent_1, answered by agent_0"
    ]


def test_the_agent_awaiting_an_inline_task_answering_while_the_task_runs_is_counted() -> None:
    probe, journal = _spoken()
    journal.handoffs.append((probe._next(), "task_0"))
    _enter(probe, "task_0")
    _say(journal, 0)
    rid = _request(journal, "agent_0", 0)

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == [
        "turn 0: answered by agent_0 while task_0 is current"
    ]


def test_an_inline_task_that_completed_before_the_turn_ended_answering_is_counted() -> None:
    probe, journal = _spoken()
    journal.handoffs.append((probe._next(), "task_0"))
    _enter(probe, "task_0")
    journal.completed_tasks["task_0"] = probe._next()
    _say(journal, 0)
    rid = _request(journal, "task_0", 0)

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == [
        "turn 0: answered by task_0, completed before"
    ]


def test_answering_a_turn_its_on_user_turn_completed_did_not_see_is_counted() -> None:
    probe, journal = _spoken(hooks=True)
    journal.handoffs.append((probe._next(), "agent_1"))
    _say(journal, 0)
    _exit(probe, "agent_0")
    _enter(probe, "agent_1")
    rid = _request(journal, "agent_1", 0)
    journal.heard.clear()  # the turn was handed over around agent_1's hook

    assert _who(journal, _history(("user", "turn 0"), ("reply", rid))) == [
        "turn 0: answered by agent_1, whose on_user_turn_completed did not see it"
    ]


# -- the audio mode's scripted model: what it reads as answered --


def _model_reply(items: list[llm.ChatItem], saying: tuple[Reply, ...] = ()) -> str:
    from tests.stress.audio import AudioWorld, generate

    _, journal = _spoken()
    world = AudioWorld(generate(0), journal.probe, journal)
    ctx = llm.ChatContext(items=items)
    return world._answer(ctx, "agent_0", "r", instructed=False, tools=False, saying=saying).full_text


def test_the_scripted_model_concludes_a_turn_its_calls_answered_and_says_which() -> None:
    # a task answered turn 1 with a tool call; its reply to the tool's output follows that up
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="turn 1")
    ctx.insert(llm.FunctionCall(call_id="r0/1", name="handoff", arguments="{}"))
    ctx.insert(llm.FunctionCallOutput(call_id="r0/1", name="handoff", output="refused", is_error=True))
    assert _model_reply(list(ctx.items)) == "agent_0 follows up turn 1"


def test_the_scripted_model_reads_a_follow_up_as_the_turns_answer_without_the_calls() -> None:
    # the agent a task returns to gets the task's context merged without the calls
    # (preserve_function_call_history=False): the follow-up still tells it the turn was answered
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="turn 1")
    ctx.add_message(role="assistant", content="task_0 follows up turn 1")
    assert _model_reply(list(ctx.items)) == "agent_0 says ok"
    # while a turn nothing answered is answered, a follow-up or not
    ctx.add_message(role="user", content="turn 2")
    assert _model_reply(list(ctx.items)) == "agent_0 answers turn 2"


def test_the_scripted_model_reads_a_reply_still_under_way_as_said() -> None:
    # a server answers one response after the other, each with the ones before it in its
    # context: the reply to turn 0's tool output asked for while the model still answers
    # turn 1 (the session adds that answer to its context once it was said) follows the call
    # up, it does not answer turn 1 again
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="turn 0")
    ctx.insert(llm.FunctionCall(call_id="r0/0", name="handoff", arguments="{}"))
    ctx.add_message(role="user", content="turn 1")
    ctx.insert(llm.FunctionCallOutput(call_id="r0/0", name="handoff", output="done", is_error=False))
    under_way = Reply("agent_0 answers turn 1")
    assert _model_reply(list(ctx.items), saying=(under_way,)) == "agent_0 follows up turn 0"
    # a call under way answers its turn just the same
    called = Reply(tool_calls=[tool_call("handoff", {"turn": 1}, call_id="r1/1")])
    assert _model_reply(list(ctx.items), saying=(called,)) == "agent_0 follows up turn 0"
    # nothing under way: turn 1 is open
    assert _model_reply(list(ctx.items)) == "agent_0 answers turn 1"
