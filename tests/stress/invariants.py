"""What a stress scenario records (:class:`Probe`) and the named invariants checked on it.

Every check returns a list of :class:`Violation`; an empty list means the invariant held.
The names in :data:`INVARIANTS` are what the runner tabulates.
"""

from __future__ import annotations

import asyncio
import re
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


# -- spoken turns (audio mode, tests/stress/audio.py) --

SPOKEN_INVARIANTS: dict[str, str] = {
    "no_lost_user_turn": "every turn whose final transcript the session emitted is in the history in "
    "exactly one user message, and that message is answered by exactly one reply that played "
    "(an assistant message or tool calls in the history) or superseded: no reply to it played and "
    "a later turn of the caller's ended without the caller waiting for the session to settle in "
    "between. No reply to it may be asked for after a later turn that is answered ended; a turn "
    "the session was closed on before it settled needs no answer. Tool calls of an inline task that "
    "completed before anything it said for the turn played are not an answer the caller heard: the "
    "agent it returned to, given the task's context without its calls, answers the turn once more "
    "after it completed, and that is the one answer. On the pipeline, every audio frame "
    "the caller pushed reached the STT (checked once settled, before aclose())",
    "answered_by_current_agent": "the reply to a spoken turn is requested for an agent that has "
    "entered and is the innermost live one (the last of the live agents to enter), whose on_exit had "
    "not begun when the reply's speech was created; if a handoff was under way when the turn's final "
    "transcript came (a tool had returned or awaited an agent, or update_agent() was called, and that "
    "agent had not entered yet), by the agent that handoff ended with, unless that agent's on_exit "
    "began before the request; never by an inline task that had completed before the turn ended; on "
    "the pipeline, the agent's on_user_turn_completed saw the turn before it answers it",
}
MODE_INVARIANTS.update(SPOKEN_INVARIANTS)

_TURN_RE = re.compile(r"\bturn (\d+)\b")


def turn_ids(text: str | None) -> tuple[int, ...]:
    """The caller's turns a message holds: ``"turn 3 turn 4"`` (two finals in one user turn) -> (3, 4)."""
    return tuple(int(m) for m in _TURN_RE.findall(text or ""))


@dataclass(frozen=True)
class TurnRequest:
    """A model request whose context ends with a user message: a reply to that spoken turn."""

    seq: int
    rid: str
    """Id of what the reply adds to the history: the assistant message's id, and the prefix of
    the call ids of the tool calls it makes."""
    agent: str | None
    turns: tuple[int, ...]
    speech: str | None = None
    """Id of the speech handle the request is a step of (its creation is in ``Probe.speeches``)."""


@dataclass
class SpokenJournal:
    """What the checks of spoken turns read (filled by the audio driver, or by hand in tests).

    Sequence numbers are the :class:`Probe`'s: ``probe._next()``.
    """

    probe: Probe
    speech_started: dict[int, int] = field(default_factory=dict)
    """turn -> seq the caller started speaking it"""
    finals: dict[int, int] = field(default_factory=dict)
    """turn -> seq the session emitted its final transcript (``user_input_transcribed``)"""
    waits: list[int] = field(default_factory=list)
    """seqs at which the caller had waited for the session to settle"""
    requests: list[TurnRequest] = field(default_factory=list)
    handoffs: list[tuple[int, str]] = field(default_factory=list)
    """(seq, agent id): a tool returned or awaited that agent, or update_agent() was given it"""
    completed_tasks: dict[str, int] = field(default_factory=dict)
    """inline task id -> seq it completed"""
    closed_at: int | None = None
    """seq aclose() was called by the scenario"""
    hooks: bool = False
    """The agents' ``on_user_turn_completed`` runs for each committed turn (the pipeline; a turn
    a realtime model's server detected does not go through it)."""
    heard: dict[int, list[str]] = field(default_factory=dict)
    """turn -> ids of the agents whose ``on_user_turn_completed`` saw it"""
    reply_items: dict[str, str] = field(default_factory=dict)
    """assistant message id -> the rid of the request it is the reply of, where the two differ"""
    last_request: dict[str, str] = field(default_factory=dict)
    """speech id -> rid of its latest model request (the driver's bookkeeping for reply_items)"""

    def waited_between(self, lo: int, hi: int) -> bool:
        return any(lo < w < hi for w in self.waits)


def _history_view(journal: SpokenJournal, items: list[Any]) -> tuple[list[tuple[int, ...]], set[str]]:
    """(turn ids of each user message, rids of the replies that played) of a session history."""
    users = [turn_ids(i.text_content) for i in items if i.type == "message" and i.role == "user"]
    played: set[str] = set()
    for i in items:
        if i.type == "message" and i.role == "assistant":
            played.add(i.id)
            played.add(journal.reply_items.get(i.id, i.id))
        elif i.type == "function_call":
            played.add(i.call_id.rsplit("/", 1)[0])
    return users, played


def _unheard_task_calls(
    journal: SpokenJournal, items: list[Any], r: TurnRequest, answers: list[TurnRequest]
) -> bool:
    """Whether ``r`` is an inline task's answer the caller never heard, which the agent it
    returned to answered again: the task answered the turn with tool calls only, completed
    before anything of it for that turn was said (its reply to the calls' outputs did not
    play), and the agent it returned to, its context merged without the task's calls
    (``AgentTask``'s ``preserve_function_call_history=False``), read the turn as open and
    answered it out loud after the task completed. The caller heard one answer. Not when
    the task said anything for the turn (a text answer, or a follow-up of its calls):
    then the turn was spoken to twice."""
    agent = r.agent
    done = journal.completed_tasks.get(agent or "")
    if agent is None or done is None:
        return False
    said = [i for i in items if i.type == "message" and i.role == "assistant"]
    if any(i.id == r.rid or journal.reply_items.get(i.id) == r.rid for i in said):
        return False  # it answered in words
    if any(
        (i.text_content or "").startswith(f"{agent} ") and set(turn_ids(i.text_content)) & set(r.turns)
        for i in said
    ):
        return False  # the follow-up of its calls played
    return any(o.agent != agent and o.seq > done for o in answers)


def check_spoken_turns(journal: SpokenJournal, items: list[Any]) -> list[Violation]:
    """``no_lost_user_turn`` on the session's final history ``items``.

    The unit is a user message: two finals in one user turn (the caller went on before the end
    of turn ran) are one message, answered once. A reply *played* if what it produced is in the
    history: an assistant message (an interrupted one keeps what played; one cut before any
    audio is not added) or its tool calls.

    **Superseded** (CONTRIBUTING.md, "Spoken turns"): a turn whose answer was interrupted by a
    later turn before any audio played, or never started. Here: no reply to it played, and a
    later turn was spoken without the caller waiting for the session to settle in between (a
    caller who waits gets an answer first). Conversely a reply to it must not be asked for after
    a later turn that was answered ended: that turn supersedes it, and the agent answers the later
    one with both in its context (two turns ending in one handoff are answered once). A reply
    asked for before the later turn ended may play: it is an answer, cut short or not.
    """
    users, played = _history_view(journal, items)
    out: list[Violation] = []
    said = sorted(journal.finals)
    for turn in said:
        n = sum(1 for msg in users if turn in msg)
        if n != 1:
            out.append(Violation("no_lost_user_turn", f"turn {turn}: in {n} user messages of the history"))
    units = list(dict.fromkeys(m for m in users if m))
    answers = {msg: [r for r in journal.requests if r.turns == msg and r.rid in played] for msg in units}
    for msg in units:
        answers[msg] = [r for r in answers[msg] if not _unheard_task_calls(journal, items, r, answers[msg])]
    answered_turns = {t for msg in units if answers[msg] for t in msg}
    for msg in units:
        ended = max(journal.finals.get(t, 0) for t in msg)
        later = [t for t in said if t > max(msg)]
        if len(answers[msg]) > 1:
            who = [r.agent for r in answers[msg]]
            out.append(Violation("no_lost_user_turn", f"{_name(msg)}: answered {len(who)} times, by {who}"))
        elif not answers[msg]:
            superseding = [
                t for t in later if not journal.waited_between(ended, journal.speech_started.get(t, ended))
            ]
            closing = journal.closed_at is not None and not journal.waited_between(ended, journal.closed_at)
            if not superseding and not closing:
                out.append(Violation("no_lost_user_turn", f"{_name(msg)}: recorded, never answered"))
        for r in answers[msg]:
            # a later turn that was answered supersedes this one from its final transcript on
            after = [t for t in later if t in answered_turns and journal.finals[t] < r.seq]
            if after:
                out.append(
                    Violation(
                        "no_lost_user_turn",
                        f"{_name(msg)}: {r.agent} answered it after turn {after[0]} ended (superseded)",
                    )
                )
    return out


def check_answering_agent(journal: SpokenJournal, items: list[Any]) -> list[Violation]:
    """``answered_by_current_agent``: who replies to each spoken turn whose reply played."""
    _, played = _history_view(journal, items)
    probe = journal.probe
    out: list[Violation] = []
    for r in journal.requests:
        if r.rid not in played or not r.turns:
            continue
        ended = max(journal.finals.get(t, 0) for t in r.turns)
        entered = {aid: seq for seq, aid, ev in probe.events if ev == "enter"}
        exiting = {aid: seq for seq, aid, ev in probe.events if ev == "exit"}
        who = _name(r.turns)
        agent = r.agent or ""
        # a speech created before the agent's on_exit began may still finish (drain() awaits
        # on_exit, then lets the queued speech run: upstream's order, as no_generation_after_exit)
        created = min(r.seq, probe.speeches.get(r.speech or "", r.seq))
        if entered.get(agent, r.seq + 1) > r.seq:
            out.append(
                Violation("answered_by_current_agent", f"{who}: answered by {agent} before its on_enter")
            )
            continue
        if exiting.get(agent, r.seq + 1) < created:
            out.append(
                Violation("answered_by_current_agent", f"{who}: answered by {agent} after its on_exit began")
            )
            continue
        live = _live_at(probe, r.seq)
        if agent in live and live[-1] != agent:
            out.append(
                Violation(
                    "answered_by_current_agent", f"{who}: answered by {agent} while {live[-1]} is current"
                )
            )
            continue
        if journal.hooks and any(agent not in journal.heard.get(t, []) for t in r.turns):
            out.append(
                Violation(
                    "answered_by_current_agent",
                    f"{who}: answered by {agent}, whose on_user_turn_completed did not see it",
                )
            )
            continue
        done = journal.completed_tasks.get(r.agent or "")
        if done is not None and done < ended:
            out.append(
                Violation("answered_by_current_agent", f"{who}: answered by {r.agent}, completed before")
            )
            continue
        spoke = max(journal.speech_started.get(t, ended) for t in r.turns)
        if not journal.hooks and spoke < created < ended:
            # a realtime model's server ends the turn: the reply it created for it once the
            # caller spoke it (not a speech of an earlier turn going on) came before the
            # transcript (a provider transcribing the input asynchronously), so the turn
            # ended no later than that, whatever handoff began after it
            ended = created
        # the handoff under way when the turn ended: the newest one whose agent had not entered
        pending = [
            (seq, aid) for seq, aid in journal.handoffs if seq < ended and entered.get(aid, ended + 1) > ended
        ]
        if pending:
            target = pending[-1][1]
            if target in entered and exiting.get(target, r.seq + 1) > r.seq and r.agent != target:
                out.append(
                    Violation(
                        "answered_by_current_agent",
                        f"{who}: ended while handing off to {target}, answered by {r.agent}",
                    )
                )
    return out


def _live_at(probe: Probe, seq: int) -> list[str]:
    """Agents live at ``seq`` (on_enter started, on_exit not), in the order they entered."""
    state: dict[str, bool] = {}
    for s, aid, ev in probe.events:
        if s > seq:
            break
        if ev == "enter":
            state.pop(aid, None)
            state[aid] = True
        elif ev == "exit":
            state[aid] = False
    return [aid for aid, live in state.items() if live]


def _name(turns: tuple[int, ...]) -> str:
    return "+".join(f"turn {t}" for t in turns)
