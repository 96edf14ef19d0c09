"""Seeded scenarios: what a stress run does, as plain frozen data.

``generate(seed)`` draws one :class:`Scenario` from ``random.Random(seed)``; the same seed gives
the same scenario on every machine and Python version (only ``randrange``/``choice``/
``random`` are used). ``shrink_candidates`` yields simpler variants, for the minimiser in
:mod:`tests.stress.runner`.

Latency is counted in event-loop *ticks* (``await asyncio.sleep(0)``), not seconds: a tool
with ``ticks=5`` gives way to the loop five times before it returns. This keeps every
interleaving a function of the seed, except where the framework itself waits on the clock
(realtime audio playout, the framework's own timeouts).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

Return = Literal["none", "text", "agent", "agent_text", "tool_error", "exception", "task"]
Scope = Literal["agent", "agent_toolset", "session_toolset"]
Action = Literal["none", "barge_in", "update_agent", "close"]
Mode = Literal["pipeline", "realtime"]

RETURNS: tuple[Return, ...] = ("none", "text", "agent", "agent_text", "tool_error", "exception", "task")
SCOPES: tuple[Scope, ...] = ("agent", "agent_toolset", "session_toolset")
ACTIONS: tuple[Action, ...] = ("none", "barge_in", "update_agent", "close")
TICKS: tuple[int, ...] = (0, 1, 2, 3, 5, 8, 13, 21, 34, 55)
MAX_TOOLS = 4


@dataclass(frozen=True)
class ToolStep:
    """One call in a generation's batch (the model calls ``tool_<i>`` for the i-th step)."""

    ticks: int
    """Loop ticks the tool takes before returning (after its update, if any)."""
    update: bool
    """``await ctx.update(...)`` first, so the return is delivered later as ``<call_id>_final``."""
    returns: Return

    def short(self) -> str:
        return f"{'u+' if self.update else ''}{self.returns}@{self.ticks}"


@dataclass(frozen=True)
class Turn:
    """One user input (``session.run``) and what happens while it runs."""

    tools: tuple[ToolStep, ...]
    """The batch the model answers the input with; empty: a plain text reply."""
    action: Action
    """Done ``action_ticks`` loop ticks after the run starts: ``barge_in`` interrupts and sends
    the next input as a user reply (no second run: nested runs are not supported);
    ``update_agent`` hands off from outside any tool; ``close`` closes the session (last turn)."""
    action_ticks: int

    def short(self) -> str:
        batch = "[" + ", ".join(t.short() for t in self.tools) + "]"
        act = "" if self.action == "none" else f" then {self.action}@{self.action_ticks}"
        return batch + act


@dataclass(frozen=True)
class Scenario:
    seed: int
    mode: Mode
    audio: bool
    """Pipeline: FakeTTS + FakeAudioOutput playing out on the loop clock (fast)."""
    auto_tool_reply: bool
    """Realtime: the model answers pushed tool outputs on its own."""
    reuse: bool
    """Realtime: mutable instructions/context/tools, so the realtime session survives handoffs."""
    scopes: tuple[Scope, ...]
    """Where ``tool_<i>`` lives: a plain agent tool, an agent AsyncToolset, the session's."""
    enter_reply: bool
    """Every agent (not tasks) asks for a reply in its ``on_enter``."""
    turns: tuple[Turn, ...]

    def describe(self) -> str:
        kind = self.mode
        if self.mode == "pipeline":
            kind += "+audio" if self.audio else "+text"
        else:
            kind += f"(auto_reply={self.auto_tool_reply}, reuse={self.reuse})"
        head = f"seed {self.seed}: {kind} scopes={list(self.scopes)} enter_reply={self.enter_reply}"
        return head + "".join(f"\n  turn {i}: {t.short()}" for i, t in enumerate(self.turns))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _tool_step(rng: random.Random, scope: Scope) -> ToolStep:
    returns = rng.choice(RETURNS)
    # an inline AgentTask is only awaited the supported way: by a plain agent tool, before any update
    if returns == "task" and scope != "agent":
        returns = "agent"
    update = returns != "task" and rng.random() < 0.35
    return ToolStep(ticks=rng.choice(TICKS), update=update, returns=returns)


def generate(seed: int) -> Scenario:
    rng = random.Random(seed)
    mode: Mode = "realtime" if rng.random() < 0.4 else "pipeline"
    audio = mode == "pipeline" and rng.random() < 0.4
    auto_tool_reply = mode == "realtime" and rng.random() < 0.5
    reuse = mode == "pipeline" or rng.random() < 0.6
    scopes = tuple(rng.choice(SCOPES) for _ in range(MAX_TOOLS))
    enter_reply = rng.random() < 0.3
    turns: list[Turn] = []
    for _ in range(rng.randint(1, 3)):
        n_tools = rng.choice((0, 1, 1, 2, 2, 3, 4))
        tools = tuple(_tool_step(rng, scopes[k]) for k in range(n_tools))
        action: Action = rng.choice(("none", "none", "barge_in", "update_agent", "close"))
        turns.append(Turn(tools=tools, action=action, action_ticks=rng.choice(TICKS)))
        if action == "close":
            break
    return Scenario(
        seed=seed,
        mode=mode,
        audio=audio,
        auto_tool_reply=auto_tool_reply,
        reuse=reuse,
        scopes=scopes,
        enter_reply=enter_reply,
        turns=tuple(turns),
    )


S = TypeVar("S")


def valid(sc: Any) -> bool:
    """Only plain agent tools await an inline AgentTask (see ``_tool_step``); ``sc`` is a
    :class:`Scenario` or one of another mode with the same ``scopes`` and ``turns``."""
    return all(
        step.returns != "task" or (sc.scopes[k] == "agent" and not step.update)
        for turn in sc.turns
        for k, step in enumerate(turn.tools)
    )


def shrink_candidates(sc: Scenario) -> Iterator[Scenario]:
    """Valid, strictly simpler variants of ``sc``, most aggressive first."""
    return (c for c in _candidates(sc) if valid(c))


def turn_candidates(sc: S) -> Iterator[S]:
    """The simpler variants of ``sc`` (a :class:`Scenario` or one of another mode with the same
    ``turns``) its turns make: a turn dropped, its action or the action's ticks, a tool dropped, a
    tool's step made simpler; most aggressive first."""
    turns = sc.turns
    for i in range(len(turns)):  # drop a turn
        if len(turns) > 1:
            yield dataclasses.replace(sc, turns=turns[:i] + turns[i + 1 :])
    for i, turn in enumerate(turns):

        def with_turn(t: Any, i: int = i) -> S:
            return dataclasses.replace(sc, turns=turns[:i] + (t,) + turns[i + 1 :])

        if turn.action != "none":
            yield with_turn(dataclasses.replace(turn, action="none", action_ticks=0))
        if turn.action_ticks:
            yield with_turn(dataclasses.replace(turn, action_ticks=0))
        for k in range(len(turn.tools)):  # drop a tool (later tools move down one slot)
            yield with_turn(dataclasses.replace(turn, tools=turn.tools[:k] + turn.tools[k + 1 :]))
        for k, step in enumerate(turn.tools):
            simpler = []
            if step.update:
                simpler.append(dataclasses.replace(step, update=False))
            if step.ticks:
                simpler.append(dataclasses.replace(step, ticks=0))
            if step.returns not in ("none", "text"):
                simpler.append(dataclasses.replace(step, returns="text"))
            for s in simpler:
                yield with_turn(dataclasses.replace(turn, tools=turn.tools[:k] + (s,) + turn.tools[k + 1 :]))


def _candidates(sc: Scenario) -> Iterator[Scenario]:
    yield from turn_candidates(sc)
    if sc.enter_reply:
        yield dataclasses.replace(sc, enter_reply=False)
    if sc.audio:
        yield dataclasses.replace(sc, audio=False)
    if sc.auto_tool_reply:
        yield dataclasses.replace(sc, auto_tool_reply=False)
    if sc.mode == "realtime" and not sc.reuse:
        yield dataclasses.replace(sc, reuse=True)
    if any(s != "agent" for s in sc.scopes):
        yield dataclasses.replace(sc, scopes=("agent",) * MAX_TOOLS)
