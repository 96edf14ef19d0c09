"""Nova mode of the stress harness: the same kinds of schedules, through the real Nova Sonic plugin.

``python -m tests.stress --mode nova --seeds 0:200``. Each scenario drives a real ``AgentSession``
whose model is the aws plugin's ``RealtimeModel`` (Nova Sonic 2, ``modalities="mixed"``), talking
to the recording Bedrock stream fake (``tests.fakes.bedrock_stream``). The fake server answers
what the plugin sends the way the scenario scripts it:

* an interactive text ``turn i`` (``session.run`` / a typed input) the first time: one completion
  with a ``toolUse`` for every step of turn ``i``'s batch (``tool_<k>``); otherwise plain text;
* any other interactive text (instructions, a tool result sent as text, the framework's
  follow-up prompt): plain text;
* the ``toolResult``s of a completion, once every toolUse it issued has one: plain text.

Tools, agents and inline tasks are the text mode's (``tests.stress.driver``). The invariants are
the text mode's, plus two of Nova's own (:data:`NOVA_INVARIANTS`): every tool output in the
history reached the model, and the fake saw no protocol violation.

Known open Nova defects (others fix them) are kept out of the schedules: no session recycles, no
``generate_reply()`` without instructions (an agent's greeting passes instructions).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from livekit.agents import AgentSession, RunContext, function_tool, llm
from livekit.agents.llm.async_toolset import AsyncToolset

from tests.fakes import current_agent, offline_session_kwargs
from tests.fakes.bedrock_stream import (
    BedrockConnection,
    FakeBedrock,
    SentEvent,
    completion_end,
    completion_start,
    event_kind,
    model_turn,
    tool_use,
    usage,
)

from . import invariants as inv
from .driver import (
    StressAgent,
    StressTask,
    World,
    _within,
    allowed_errors,
    close_and_check,
    current_speech,
    run_turns,
    ticks,
    user_text,
)
from .hygiene import ScenarioHygiene
from .invariants import Probe, Violation
from .scenario import MAX_TOOLS, SCOPES, TICKS, Scope, ToolStep, _tool_step, turn_candidates, valid

NOVA_INVARIANTS: dict[str, str] = {
    "tool_output_reached_model": "every function_call_output in session.history reached the model: "
    "as a toolResult on the connection that issued the call, or as the tool-result text the "
    "plugin sends for a result it has no open toolUse for (an async tool's later results, a call "
    "an earlier connection issued)",
    "bedrock_protocol": "the Bedrock fake recorded no violation: no event sent on a closed stream, "
    "no toolResult for an id the connection never issued, no second toolResult for one id",
}
inv.MODE_INVARIANTS.update(NOVA_INVARIANTS)

INVARIANTS: dict[str, str] = {**inv.INVARIANTS, **NOVA_INVARIANTS}
"""What the runner tabulates in Nova mode."""

TOOL_TEXT_MARK = "(call id {call_id})"
"""How the plugin's tool-result text names its call (``_send_tool_output_as_text``)."""

NovaAction = Literal["none", "barge_in", "type", "update_agent", "close"]


@dataclass(frozen=True)
class NovaTurn:
    """One ``session.run(user_input="turn i")`` and what happens while it runs."""

    tools: tuple[ToolStep, ...]
    """The toolUses of the completion the model answers the input with (in that one completion)."""
    action: NovaAction
    """Done ``action_ticks`` loop ticks after the run starts: ``barge_in`` interrupts and types the
    next input; ``type`` types it without interrupting; ``update_agent`` hands off from outside
    any tool; ``close`` closes the session (last turn)."""
    action_ticks: int

    def short(self) -> str:
        batch = "[" + ", ".join(t.short() for t in self.tools) + "]"
        act = "" if self.action == "none" else f" then {self.action}@{self.action_ticks}"
        return batch + act


@dataclass(frozen=True)
class NovaScenario:
    seed: int
    scopes: tuple[Scope, ...]
    enter_reply: bool
    """Every agent (not tasks) greets in its ``on_enter``: ``generate_reply(instructions=...)``."""
    early_input: bool
    """The first input is typed as soon as ``session.start()`` returns, while the first stream is
    still connecting; otherwise once it streams (what the Nova regression tests wait for)."""
    turns: tuple[NovaTurn, ...]
    mode: str = "nova"

    def describe(self) -> str:
        head = (
            f"seed {self.seed}: nova scopes={list(self.scopes)} enter_reply={self.enter_reply} "
            f"early_input={self.early_input}"
        )
        return head + "".join(f"\n  turn {i}: {t.short()}" for i, t in enumerate(self.turns))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def generate(seed: int) -> NovaScenario:
    rng = random.Random(seed)
    scopes = tuple(rng.choice(SCOPES) for _ in range(MAX_TOOLS))
    enter_reply = rng.random() < 0.3
    early_input = rng.random() < 0.2
    turns: list[NovaTurn] = []
    for _ in range(rng.randint(1, 3)):
        n_tools = rng.choice((0, 1, 1, 2, 2, 3, 4))
        tools = tuple(_tool_step(rng, scopes[k]) for k in range(n_tools))
        action: NovaAction = rng.choice(("none", "none", "barge_in", "type", "update_agent", "close"))
        turns.append(NovaTurn(tools=tools, action=action, action_ticks=rng.choice(TICKS)))
        if action == "close":
            break
    return NovaScenario(
        seed=seed, scopes=scopes, enter_reply=enter_reply, early_input=early_input, turns=tuple(turns)
    )


def shrink_candidates(sc: NovaScenario) -> Iterator[NovaScenario]:
    """Valid, strictly simpler variants of ``sc``, most aggressive first."""
    return (c for c in _candidates(sc) if valid(c))


def _candidates(sc: NovaScenario) -> Iterator[NovaScenario]:
    yield from turn_candidates(sc)
    if sc.enter_reply:
        yield dataclasses.replace(sc, enter_reply=False)
    if sc.early_input:
        yield dataclasses.replace(sc, early_input=False)
    if any(s != "agent" for s in sc.scopes):
        yield dataclasses.replace(sc, scopes=("agent",) * MAX_TOOLS)


# -- agents: the text mode's, greeting with instructions ------------------------------------------


class NovaAgent(StressAgent):
    async def on_enter(self) -> None:
        self.world.probe.agent_event(self, "enter")
        if self.world.sc.enter_reply:
            # with instructions: Nova answers a generate_reply() without them only if a user
            # text is pending (a known open defect otherwise: the reply never resolves)
            self.session.generate_reply(instructions=f"greet as {self.id}")
        self.world.probe.agent_event(self, "entered")


class NovaTask(StressTask):
    """The text mode's inline task, with one tool: a Nova session without tools waits 0.5 s for
    them before it opens its stream."""

    def __init__(self, world: World, task_id: str, n: int) -> None:
        super().__init__(world, task_id, n)

        async def noop() -> None:
            return None

        self._tools = [function_tool(noop, name="noop", description="Does nothing.")]


# -- the world: tools and agents of the text mode, the Nova plugin as the model --------------------


class NovaWorld(World):
    def __init__(self, sc: NovaScenario, probe: Probe, server: FakeBedrock) -> None:
        # World.__init__ builds a scripted model from the text mode's scenario fields; the
        # state it sets up besides is rebuilt here
        self.sc = sc  # type: ignore[assignment]
        self.probe = probe
        self.server = server
        self.plan = {
            f"t{i}s{k}": step for i, turn in enumerate(sc.turns) for k, step in enumerate(turn.tools)
        }
        self.answered = set()
        self.n_agents = 0
        self.tools = [self._make_tool(k) for k in range(len(sc.scopes))]
        self.session_tools = []
        if scoped := self._scoped("session_toolset"):
            self.session_tools.append(AsyncToolset(id="session_async", tools=scoped))
        self.model = _nova_model(self)
        self._blocks: dict[str, dict[str, Any]] = {}
        self._texts: dict[str, str] = {}
        self._batches: dict[tuple[int, str], set[str]] = {}
        """(connection, completion id) -> toolUse ids it issued, for the reply to their results"""
        self.closed_at: float | None = None
        """``time.time()`` when the scenario started ``aclose()``"""
        self.everyone: dict[str, Any] = {}
        """Every agent and task of the scenario, by id, from when it is made"""
        server.reply_when(lambda e: True, self._react, once=False)

    def new_agent(self, chat_ctx: llm.ChatContext | None = None) -> StressAgent:
        """The text mode's agent (same id, tools and carry rule), greeting with instructions."""
        agent_id = f"agent_{self.n_agents}"
        self.n_agents += 1
        tools: list[Any] = list(self._scoped("agent"))
        if scoped := self._scoped("agent_toolset"):
            tools.append(AsyncToolset(id=f"{agent_id}_async", tools=scoped))
        if chat_ctx is not None:
            self.probe.carries_on.add(agent_id)
        agent = self.everyone[agent_id] = NovaAgent(self, agent_id, tools, chat_ctx=chat_ctx)
        return agent

    async def _run_tool(self, ctx: RunContext, key: str) -> Any:
        step = self.plan[key]
        if step.returns != "task":
            return await super()._run_tool(ctx, key)
        self.probe.tool_started()  # the text mode's "task" step, with a task that has a tool
        try:
            await ticks(step.ticks)
            task = self.everyone[f"task_{key}"] = NovaTask(self, f"task_{key}", step.ticks)
            return await task
        finally:
            self.probe.tool_finished()

    # -- the fake server's side --

    def _react(self, conn: BedrockConnection, e: SentEvent) -> list[Any]:
        kind = event_kind(e)
        body = e["event"][kind]
        if kind == "contentStart":
            self._blocks[body["contentName"]] = body
        elif kind in ("textInput", "toolResult"):
            self._texts[body["contentName"]] = body["content"]
        if kind != "contentEnd" or (start := self._blocks.get(body["contentName"])) is None:
            return []
        if (cfg := start.get("toolResultInputConfiguration")) is not None:
            return self._answer_tool_result(conn, cfg.get("toolUseId"))
        if start.get("type") == "TEXT" and start.get("interactive"):
            return self._answer_text(conn, self._texts.get(body["contentName"], ""))
        return []

    def _speaker(self, conn: BedrockConnection) -> str:
        return speaker(conn)

    def _answer_text(self, conn: BedrockConnection, text: str) -> list[Any]:
        words = text.split()
        turn = int(words[1]) if len(words) > 1 and words[0] == "turn" and words[1].isdigit() else -1
        if 0 <= turn < len(self.sc.turns) and turn not in self.answered:
            self.answered.add(turn)
            batch = self.sc.turns[turn].tools
            if batch:
                cid = f"completion_t{turn}"
                events: list[Any] = [completion_start(cid)]
                ids = [f"c{turn}_{k}" for k in range(len(batch))]
                for k, call_id in enumerate(ids):
                    events += tool_use(call_id, f"tool_{k}", {"step": f"t{turn}s{k}"}, completion_id=cid)
                events += [usage(cid), completion_end(cid, stop_reason="TOOL_USE")]
                self._batches[(conn.index, cid)] = set(ids)
                self.probe.issued.update(dict.fromkeys(ids, self._speaker(conn)))
                return events
        return model_turn(f"{self._speaker(conn)} says ok", audio=False)

    def _answer_tool_result(self, conn: BedrockConnection, tool_id: str | None) -> list[Any]:
        for (index, cid), ids in self._batches.items():
            if index == conn.index and tool_id in ids:
                if ids <= set(conn.answered_tool_ids):
                    del self._batches[(index, cid)]
                    return model_turn(f"{self._speaker(conn)} says ok", audio=False)
                return []
        return []

    # -- the checks of Nova's own --

    def check_tool_outputs(self, session: AgentSession[Any], closed_at: float | None) -> list[Violation]:
        def holders(item_id: str) -> set[str]:
            return {name for name, a in self.everyone.items() if a.chat_ctx.get_by_id(item_id) is not None}

        return check_tool_outputs(session.history.items, self.server.connections, closed_at, holders)

    def check_protocol(self) -> list[Violation]:
        return check_protocol(self.server)


def check_protocol(server: FakeBedrock) -> list[Violation]:
    """What the fake recorded as breaking the protocol, on every connection."""
    return [Violation("bedrock_protocol", v) for v in server.violations]


def speaker(conn: BedrockConnection) -> str:
    """The agent (or task) whose realtime session opened ``conn``: its system prompt names it."""
    for e in conn.sent:
        if event_kind(e) == "textInput" and (text := e["event"]["textInput"]["content"]).startswith(
            "You are "
        ):
            return text.removeprefix("You are ").rstrip(".")
    return "model"


def _tool_texts(conn: BedrockConnection) -> list[str]:
    return [
        e["event"]["textInput"]["content"]
        for e in conn.sent
        if event_kind(e) == "textInput" and "This is a tool result" in e["event"]["textInput"]["content"]
    ]


def check_tool_outputs(
    items: list[llm.ChatItem],
    connections: list[BedrockConnection],
    closed_at: float | None = None,
    holders: Callable[[str], set[str]] | None = None,
) -> list[Violation]:
    """Every function_call_output reached the model: a toolResult on the connection that issued
    its call, or the plugin's tool-result text naming its call id on any connection. An output
    made once ``aclose()`` started (``closed_at``, ``time.time()``) has no model left to reach.
    One recorded after its agent handed off, or was left behind by an outside ``update_agent()``
    while its tool awaited a task, is counted: it is owed to the model of the agent in charge.
    Nor is one counted that no stream was left to carry before the close: ``holders(item id)``
    names the agents and tasks whose context holds it, and none of them had a stream open
    between the output and ``aclose()`` (e.g. an inline task given the result before its
    session connected, and the session closed first)."""
    as_results = {t for c in connections for t in c.answered_tool_ids if t in c.issued_tool_ids}
    texts = [t for c in connections for t in _tool_texts(c)]
    out: list[Violation] = []
    for item in items:
        if item.type != "function_call_output" or (closed_at is not None and item.created_at >= closed_at):
            continue
        if closed_at is not None and holders is not None and (names := holders(item.id)):
            carriers = [
                c
                for c in connections
                if speaker(c) in names
                and c.opened_at < closed_at
                and (c.ended_at is None or c.ended_at > item.created_at)
            ]
            if not carriers:
                continue
        if item.call_id in as_results or any(TOOL_TEXT_MARK.format(call_id=item.call_id) in t for t in texts):
            continue
        call = item.call_id.split("_update_")[0].removesuffix("_final")
        issued = [c.index for c in connections if call in c.issued_tool_ids]
        out.append(
            Violation(
                "tool_output_reached_model",
                f"{item.call_id} ({item.output[:40]!r}) never reached the model "
                f"(call issued on connection(s) {issued} of {len(connections)})",
            )
        )
    return out


# -- the model: the aws plugin, probed ------------------------------------------------------------


def _nova_model(world: NovaWorld) -> Any:
    from livekit.plugins.aws.experimental.realtime import RealtimeModel

    probe = world.probe

    class _ProbedNova(RealtimeModel):
        def session(self, *, turn_detection_disabled: bool = False) -> Any:
            sess = super().session(turn_detection_disabled=turn_detection_disabled)
            generate_reply = sess.generate_reply

            def probed(**kwargs: Any) -> asyncio.Future[llm.GenerationCreatedEvent]:
                who = current_agent()
                ctx = who.chat_ctx if who is not None else sess.chat_ctx
                probe.generation(who, "nova generate_reply", current_speech(), ctx)
                return generate_reply(**kwargs)

            sess.generate_reply = probed
            return sess

    return _ProbedNova(modalities="mixed")


# -- driving a scenario ---------------------------------------------------------------------------


async def _act(session: AgentSession[Any], world: NovaWorld, turn: int) -> asyncio.Future[Any] | None:
    spec = world.sc.turns[turn]
    await ticks(spec.action_ticks)
    if spec.action in ("barge_in", "type"):
        try:
            if spec.action == "barge_in":
                session.interrupt()
            session.generate_reply(user_input=f"{user_text(turn)} {spec.action}")
        except RuntimeError:
            pass  # the speech in progress is not interruptible / the session is closing
    elif spec.action == "update_agent":
        session.update_agent(world.new_agent())
    elif spec.action == "close":
        world.closed_at = time.time()
        return asyncio.ensure_future(session.aclose())
    return None


async def run_scenario(sc: NovaScenario) -> list[Violation]:
    probe = Probe()
    hygiene = ScenarioHygiene(allowed_errors(sc))
    hygiene.install()
    out: list[Violation] = []
    monkeypatch = pytest.MonkeyPatch()
    try:
        server = FakeBedrock()
        server.install(monkeypatch)
        world = NovaWorld(sc, probe, server)
        session: AgentSession[Any] = AgentSession(
            **offline_session_kwargs(llm=world.model, tools=world.session_tools)
        )
        session.on("speech_created", lambda ev: probe.speech_created(ev.speech_handle.id))
        await session.start(world.new_agent(), record=False)
        if not sc.early_input:
            await _within((await server.connection(0)).wait_ready(), inv.RUN_BOUND)

        closing = await run_turns(session, sc, lambda i: _act(session, world, i), out)

        def closed_now() -> None:
            world.closed_at = time.time()

        await close_and_check(session, probe, closing, out, before_close=closed_now)
        out += world.check_tool_outputs(session, world.closed_at)
        out += world.check_protocol()
    finally:
        await hygiene.close()
        monkeypatch.undo()
    out += hygiene.violations()
    return out
