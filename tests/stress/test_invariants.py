"""The ``leaving_agent_silent`` check on hand-written journals.

The harness itself can only show that a build passes; these pin down what the check counts as
the #5150 failure (the agent a handoff of its own batch took out goes on to answer that batch)
and what it leaves to the drain order every speech in flight follows (a bystander's reply with
another agent's results in its context; the in-flight reply of an agent that an unrelated
handoff took out first).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.stress.invariants import Generation, Probe, check_late_generations


@dataclass
class _Agent:
    id: str


def _generation(probe: Probe, agent: str, answered: tuple[str, ...], *, voices: bool = False) -> None:
    probe.generations.append(
        Generation(
            seq=probe._next(),
            agent=agent,
            what="realtime generate_reply",
            speech=f"speech_{agent}",
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
