"""What a stress scenario records (:class:`Probe`) and the named invariants checked on it.

Every check returns a list of :class:`Violation`; an empty list means the invariant held.
The names in :data:`INVARIANTS` are what the runner tabulates.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from livekit.agents import Agent, AgentSession, llm

INVARIANTS: dict[str, str] = {
    "single_active_agent": "once settled exactly one agent is live (entered, not exited) and it is "
    "session.current_agent, the agent of the session's activity; after aclose() none is live",
    "enter_exit_balanced": "per agent instance: on_enter at most once, on_exit at most once and only "
    "after on_enter, and every on_exit that started finished",
    "no_generation_after_exit": "no LLM / realtime generate_reply request on behalf of an agent "
    "after its on_exit finished, unless it continues a speech created before that on_exit started "
    "(drain() awaits on_exit, then lets the queued speech finish: upstream's documented order)",
    "leaving_agent_silent": "once its on_exit started, an agent answers a batch of its own in which "
    "a tool returned the agent that took over from it, when that agent carries the conversation "
    "on (built with its context), only to voice a handoff message ((Agent, str)), never the "
    "siblings' results alone (#5150); an agent that starts afresh leaves them to it",
    "one_output_per_call": "every function_call in session.history has exactly one "
    "function_call_output with its call_id, and every output has its call",
    "unique_item_ids": "no two items of session.history share an id",
    "run_returns": "every session.run() returns (without raising) within RUN_BOUND",
    "settles": "after the last turn the session goes idle, every tool returns and nothing more "
    "happens, within SETTLE_BOUND",
    "aclose_returns": "session.aclose() returns within CLOSE_BOUND",
    "no_leaked_tasks": "no asyncio task of the scenario is still running TASK_GRACE after aclose() "
    "(nor garbage-collected while pending)",
    "no_unexpected_error_logs": "no ERROR record on the livekit loggers except those the scenario "
    "itself causes (see ALLOWED_ERRORS), and no exception reported to the loop's exception handler "
    "(e.g. 'Task exception was never retrieved')",
    "driver_ok": "no exception escapes the session's public API while the scenario drives it",
}

MODE_INVARIANTS: dict[str, str] = {}
"""Invariants a mode of its own adds (e.g. ``tests.stress.nova``); it fills this in on import."""

RUN_BOUND = 3.0
SETTLE_BOUND = 3.0
CLOSE_BOUND = 5.0
TASK_GRACE = 0.5

HANDOFF_MESSAGE = "handing off after"
"""Prefix of the message a tool returns with its agent, ``(agent, "handing off after ...")``."""

AgentEvent = Literal["enter", "entered", "exit", "exited", "exit_cancelled"]


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str

    def __post_init__(self) -> None:
        assert self.invariant in INVARIANTS or self.invariant in MODE_INVARIANTS, self.invariant


@dataclass(frozen=True)
class Generation:
    seq: int
    agent: str | None
    """Id of the agent whose activity asked (best effort: the activity context variable)."""
    what: str
    speech: str | None
    """Id of the speech handle it is a step of (best effort: the speech context variable)."""
    answered: tuple[str, ...]
    """call ids of the function outputs the context ends with (empty: not a reply to tools)."""
    voices_handoff: bool
    """Those outputs include the message of a returned handoff."""


@dataclass
class Probe:
    """Journal of one scenario, ordered by a single sequence counter."""

    seq: int = 0
    agents: dict[str, Agent] = field(default_factory=dict)
    events: list[tuple[int, str, AgentEvent]] = field(default_factory=list)
    """(seq, agent id, event)"""
    generations: list[Generation] = field(default_factory=list)
    speeches: dict[str, int] = field(default_factory=dict)
    """speech id -> seq of its ``speech_created`` event"""
    handoff_calls: dict[str, str] = field(default_factory=dict)
    """call id (``<id>_final`` for deferred returns) -> id of the agent that tool call returned"""
    issued: dict[str, str] = field(default_factory=dict)
    carries_on: set[str] = field(default_factory=set)
    """ids of the agents built with the leaving agent's context"""
    """call id -> id of the agent the model issued it for (whose batch it is)"""
    tools_running: int = 0
    tools_idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.tools_idle.set()

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def agent_event(self, agent: Agent, event: AgentEvent) -> None:
        self.agents.setdefault(agent.id, agent)
        self.events.append((self._next(), agent.id, event))

    def generation(self, agent: Any | None, what: str, speech: Any | None, chat_ctx: llm.ChatContext) -> None:
        items = chat_ctx.items
        tail: list[llm.FunctionCallOutput] = []
        for item in reversed(items):
            if item.type == "message":
                break
            if item.type == "function_call_output":
                tail.append(item)
        self.generations.append(
            Generation(
                seq=self._next(),
                agent=getattr(agent, "id", None),
                what=what,
                speech=getattr(speech, "id", None),
                answered=tuple(o.call_id for o in tail)
                if items and items[-1].type == "function_call_output"
                else (),
                voices_handoff=any(o.output.startswith(HANDOFF_MESSAGE) for o in tail),
            )
        )

    def speech_created(self, speech_id: str) -> None:
        self.speeches.setdefault(speech_id, self._next())

    def tool_started(self) -> None:
        self.tools_running += 1
        self.tools_idle.clear()

    def tool_finished(self) -> None:
        self.tools_running -= 1
        if self.tools_running == 0:
            self.tools_idle.set()

    def live_agents(self) -> list[str]:
        """Ids of agents whose on_enter started and whose on_exit did not."""
        state: dict[str, bool] = {}
        for _, aid, ev in self.events:
            if ev == "enter":
                state[aid] = True
            elif ev == "exit":
                state[aid] = False
        return [aid for aid, live in state.items() if live]

    def issuer(self, call_id: str) -> str | None:
        """The agent whose batch a call (or the deferred return ``<id>_final`` of one) is in."""
        return self.issued.get(call_id.removesuffix("_final"))

    def successor(self, agent_id: str) -> str | None:
        """The agent that took over from ``agent_id``: the first to enter after its on_exit."""
        exit_at = next((seq for seq, aid, ev in self.events if aid == agent_id and ev == "exit"), None)
        if exit_at is None:
            return None
        return next((aid for seq, aid, ev in self.events if seq > exit_at and ev == "enter"), None)

    def signature(self) -> tuple[int, ...]:
        return (self.seq, self.tools_running)


def check_active(probe: Probe, session: AgentSession[Any], *, closed: bool) -> list[Violation]:
    live = probe.live_agents()
    if closed:
        if live:
            return [Violation("single_active_agent", f"after aclose() still live: {live}")]
        return []
    out: list[Violation] = []
    current = session.current_agent
    if live != [current.id]:
        out.append(Violation("single_active_agent", f"live agents {live}, current_agent {current.id}"))
    activity = getattr(session, "_activity", None)
    if activity is None or activity.agent is not current:
        what = None if activity is None else activity.agent.id
        out.append(Violation("single_active_agent", f"session activity runs {what}, current is {current.id}"))
    return out


def check_enter_exit(probe: Probe) -> list[Violation]:
    out: list[Violation] = []
    per_agent: dict[str, list[AgentEvent]] = {}
    for _, aid, ev in probe.events:
        per_agent.setdefault(aid, []).append(ev)
    for aid, evs in per_agent.items():
        counts = Counter(evs)
        bad = (
            counts["enter"] > 1
            or counts["exit"] > 1
            or (counts["exit"] and (not counts["enter"] or evs.index("exit") < evs.index("enter")))
            or counts["exit"] != counts["exited"] + counts["exit_cancelled"]
        )
        if bad or counts["exit_cancelled"]:
            out.append(Violation("enter_exit_balanced", f"{aid}: {evs}"))
    return out


def check_late_generations(probe: Probe) -> list[Violation]:
    exiting_at = {aid: seq for seq, aid, ev in probe.events if ev == "exit"}
    exited_at = {aid: seq for seq, aid, ev in probe.events if ev == "exited"}
    entered = {aid for _, aid, ev in probe.events if ev == "enter"}
    entered_via = {call for call, aid in probe.handoff_calls.items() if aid in entered}
    out: list[Violation] = []
    for g in probe.generations:
        if g.agent is None or g.agent not in exiting_at:
            continue
        speech_at = probe.speeches.get(g.speech or "", g.seq)
        if g.agent in exited_at and g.seq > exited_at[g.agent] and speech_at > exiting_at[g.agent]:
            out.append(
                Violation("no_generation_after_exit", f"{g.what} for {g.agent}: new speech after on_exit")
            )
        # a handoff of its own batch that took it out: the agent its tool returned entered
        # next. Another agent's results in its context (a session-scoped tool delivers to the
        # current agent), or its own in-flight reply after an unrelated handoff took it out
        # first, are the drain order of any speech in flight, not #5150
        took_place = [
            c
            for c in g.answered
            if c in entered_via
            and probe.issuer(c) == g.agent
            and probe.handoff_calls[c] == probe.successor(g.agent)
            and probe.handoff_calls[c] in probe.carries_on
        ]
        if g.seq > exiting_at[g.agent] and took_place and not g.voices_handoff:
            out.append(
                Violation(
                    "leaving_agent_silent", f"{g.what} for {g.agent} replies to a handoff batch after on_exit"
                )
            )
    return out


def check_history(session: AgentSession[Any]) -> list[Violation]:
    items = session.history.items
    out: list[Violation] = []
    dup_ids = [i for i, n in Counter(item.id for item in items).items() if n > 1]
    if dup_ids:
        out.append(Violation("unique_item_ids", f"duplicate ids {dup_ids}"))
    calls = Counter(item.call_id for item in items if item.type == "function_call")
    outputs = Counter(item.call_id for item in items if item.type == "function_call_output")
    for call_id in sorted(set(calls) | set(outputs)):
        if calls[call_id] != 1 or outputs[call_id] != 1:
            out.append(
                Violation(
                    "one_output_per_call",
                    f"{call_id}: {calls[call_id]} call(s), {outputs[call_id]} output(s)",
                )
            )
    return out
