"""Audio mode of the stress harness (issue 17): the user's turns are spoken, not ``run()``.

``python -m tests.stress --mode audio --seeds 0:200``. A scenario is a caller speaking turns into
a real ``AgentSession`` while its agents hand off:

* **pipeline**: the caller's audio goes through the session's own audio input, VAD and STT
  (:mod:`tests.fakes.speech`): start of speech, 0-2 interim transcripts, end of speech, the final
  transcript, each step some loop ticks after the one before; the turn ends on the VAD (endpointing
  delay 0). 50 % of them with ``FakeTTS`` and ``FakeAudioOutput`` playing out on the loop clock, so
  the caller's speech barges in on what the agent says;
* **realtime**: the scripted realtime model's server detects the turn (speech started, stopped,
  then the transcript and the model's own reply, in either order and some ticks apart), with the
  realtime session reused or replaced across handoffs, and automatic tool replies on or off.

Each turn either waits for the session to settle first (a caller who waits for the answer) or
starts some ticks after the previous turn's final transcript, so it lands in whatever the previous
turn set off: a handoff (a tool returns a new agent, ``(agent, "handing off after turn <i>")``, or awaits an
inline ``AgentTask`` completing itself some ticks into its ``on_enter``), ``update_agent()`` from
outside, ``aclose()``, or the agent's answer (a barge-in). The model answers a user turn with the
turn's planned tool call once, and with text otherwise.

Checked: the invariants of the text mode that apply (no ``run()`` here) and the two of spoken turns,
``no_lost_user_turn`` and ``answered_by_current_agent`` (:mod:`tests.stress.invariants`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from livekit.agents import Agent, AgentSession, AgentTask, RunContext, function_tool, llm

from tests.fakes import (
    Caller,
    FakeAudioOutput,
    FakeTTS,
    LLMCall,
    Reply,
    RTGeneration,
    ScriptedRealtimeSession,
    current_agent,
    offline_session_kwargs,
    tool_call,
)

from . import invariants as inv
from .driver import _ProbedLLM, _ProbedRealtimeModel, _settle, _within, current_speech, ticks
from .hygiene import ScenarioHygiene
from .invariants import Probe, SpokenJournal, TurnRequest, Violation

Kind = Literal["pipeline", "realtime"]
Answer = Literal["text", "agent", "agent_text", "task", "update_agent", "close"]

ANSWERS: tuple[Answer, ...] = ("text", "text", "agent", "agent_text", "task", "update_agent", "close")
TICKS: tuple[int, ...] = (0, 1, 2, 3, 5, 8, 13, 21, 34, 55)
GREETING = "Greet the caller."

INVARIANTS: dict[str, str] = {**inv.INVARIANTS, **inv.SPOKEN_INVARIANTS}
"""What the runner tabulates in audio mode."""

ALLOWED_ERRORS: dict[str, str] = {
    # agent_activity._inline_task_slot raises this into the tool awaiting an inline AgentTask
    # when that speech is interrupted (a barge-in, aclose()); the tool's exception is logged
    "task": r"exception occurred while executing tool"
    r".*the speech that awaited the inline task is interrupted",
    # realtime only: AgentActivity._inline_task_slot holds the interruptions of the speech that
    # awaits an inline task (SpeechHandle._hold_interruptions) on purpose, so the server's
    # input_speech_started while it runs finds it uninterruptible; _on_input_speech_started
    # catches that RuntimeError and logs it at ERROR, as if it could not happen. The caller's
    # turn is still handled (the spoken-turn checks see to that): a log level, not a lost turn
    "realtime+task": r"RealtimeAPI input_speech_started, but current speech is not interruptable",
}


@dataclass(frozen=True)
class SpokenTurn:
    """One turn the caller speaks (``"turn <i>"``) and what the model answers it with."""

    wait: bool
    """The caller waits for the session to settle before speaking (else it speaks ``ticks`` after
    the previous turn's final transcript)."""
    ticks: int
    interims: int
    gaps: tuple[int, int, int]
    """Loop ticks between the steps: start -> interims / stopped, -> end of speech / transcript,
    -> final transcript / the other of transcript and reply (realtime)."""
    transcript_first: bool
    """Realtime: the transcript comes before the model's reply (else after it)."""
    answer: Answer
    """``text``; a tool returning ``agent`` or ``(agent, "handing off after turn <i>")``; a tool awaiting an
    inline ``task``; ``update_agent()`` or ``aclose()`` from outside, ``answer_ticks`` after the
    final transcript (the model answers those with text)."""
    answer_ticks: int
    """Tool latency; ticks into its on_enter the task completes; ticks to the outside action."""

    def short(self) -> str:
        when = "wait" if self.wait else f"+{self.ticks}"
        extra = "" if self.answer == "text" else f" -> {self.answer}@{self.answer_ticks}"
        order = "" if self.transcript_first else " reply-first"
        return f"{when} i{self.interims} gaps{list(self.gaps)}{order}{extra}"


@dataclass(frozen=True)
class AudioScenario:
    seed: int
    kind: Kind
    audio_out: bool
    """Pipeline: FakeTTS + FakeAudioOutput playing out on the loop clock (else text only)."""
    reuse: bool
    """Realtime: mutable capabilities, the realtime session is handed on across handoffs."""
    auto_tool_reply: bool
    carry: bool
    """Agents a tool returns carry the conversation on (built with the leaving agent's context)."""
    enter_reply: bool
    """Every agent (not tasks) asks for a greeting in its on_enter."""
    model_ticks: int
    """Loop ticks before the model's first token (pipeline)."""
    turns: tuple[SpokenTurn, ...]

    def describe(self) -> str:
        kind = self.kind
        if kind == "pipeline":
            kind += "+audio" if self.audio_out else "+text"
        else:
            kind += f"(reuse={self.reuse}, auto_reply={self.auto_tool_reply})"
        head = (
            f"seed {self.seed} (audio): {kind} carry={self.carry} enter_reply={self.enter_reply} "
            f"model@{self.model_ticks}"
        )
        return head + "".join(f"\n  turn {i}: {t.short()}" for i, t in enumerate(self.turns))

    def to_json(self) -> dict[str, Any]:
        return {"mode": "audio", **dataclasses.asdict(self)}


def generate(seed: int) -> AudioScenario:
    rng = random.Random(seed)
    kind: Kind = "realtime" if rng.random() < 0.4 else "pipeline"
    turns: list[SpokenTurn] = []
    for i in range(rng.randint(2, 5)):
        answer = rng.choice(ANSWERS)
        turns.append(
            SpokenTurn(
                wait=i > 0 and rng.random() < 0.3,
                ticks=rng.choice(TICKS),
                interims=rng.choice((0, 1, 1, 2)),
                gaps=(rng.choice(TICKS[:6]), rng.choice(TICKS[:6]), rng.choice(TICKS[:6])),
                transcript_first=rng.random() < 0.6,
                answer=answer,
                answer_ticks=rng.choice(TICKS),
            )
        )
        if answer == "close":
            break
    return AudioScenario(
        seed=seed,
        kind=kind,
        audio_out=kind == "pipeline" and rng.random() < 0.5,
        reuse=kind == "pipeline" or rng.random() < 0.6,
        auto_tool_reply=kind == "realtime" and rng.random() < 0.5,
        carry=rng.random() < 0.5,
        enter_reply=rng.random() < 0.3,
        model_ticks=rng.choice(TICKS[:7]),
        turns=tuple(turns),
    )


def shrink_candidates(sc: AudioScenario) -> Iterator[AudioScenario]:
    """Strictly simpler variants of ``sc``, most aggressive first."""
    turns = sc.turns
    for i in range(len(turns)):
        if len(turns) > 1:
            yield dataclasses.replace(sc, turns=turns[:i] + turns[i + 1 :])
    for i, turn in enumerate(turns):

        def with_turn(t: SpokenTurn, i: int = i) -> AudioScenario:
            return dataclasses.replace(sc, turns=turns[:i] + (t,) + turns[i + 1 :])

        if turn.answer not in ("text", "close"):
            yield with_turn(dataclasses.replace(turn, answer="text"))
        if turn.interims:
            yield with_turn(dataclasses.replace(turn, interims=0))
        if any(turn.gaps):
            yield with_turn(dataclasses.replace(turn, gaps=(0, 0, 0)))
        if turn.ticks:
            yield with_turn(dataclasses.replace(turn, ticks=0))
        if turn.answer_ticks:
            yield with_turn(dataclasses.replace(turn, answer_ticks=0))
    if sc.enter_reply:
        yield dataclasses.replace(sc, enter_reply=False)
    if sc.audio_out:
        yield dataclasses.replace(sc, audio_out=False)
    if sc.auto_tool_reply:
        yield dataclasses.replace(sc, auto_tool_reply=False)
    if sc.model_ticks:
        yield dataclasses.replace(sc, model_ticks=0)


# -- the agents, the tool and the model --


def _said(item: llm.ChatItem) -> bool:
    return item.type in ("function_call", "function_call_output") or (
        item.type == "message" and item.role in ("user", "assistant")
    )


FOLLOWS_UP = " follows up "
"""A tool reply (``agent_0 follows up turn 2``): it answers no turn of its own, it concludes the
answer the calls before it gave (the turn's request is the calls')."""


def _answered_by(text: str) -> set[int]:
    """The turns an assistant message of the scripted model answers or follows up."""
    return set(inv.turn_ids(text.partition(" answers ")[2] or text.partition(FOLLOWS_UP)[2]))


def _tool_reply_to(said: list[llm.ChatItem]) -> list[int]:
    """The turns the calls whose outputs end ``said`` answered (empty if it does not end so)."""
    turns: list[int] = []
    for i in reversed(said):
        if i.type != "function_call_output":
            break
        if "/" in i.call_id:
            turns.append(int(i.call_id.rsplit("/", 1)[1]))
    return sorted(set(turns))


class SpokenAgent(Agent):
    def __init__(self, world: AudioWorld, agent_id: str, chat_ctx: llm.ChatContext | None = None) -> None:
        super().__init__(
            instructions=f"You are {agent_id}.", id=agent_id, tools=[world.tool], chat_ctx=chat_ctx
        )
        self.world = world

    async def on_enter(self) -> None:
        self.world.probe.agent_event(self, "enter")
        if self.world.sc.enter_reply:
            self.session.generate_reply(instructions=GREETING)
        self.world.probe.agent_event(self, "entered")

    async def on_exit(self) -> None:
        self.world.probe.agent_event(self, "exit")
        await ticks(1)
        self.world.probe.agent_event(self, "exited")

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        self.world.heard(self, new_message)


class SpokenTask(AgentTask[str]):
    """An inline task that completes itself ``n`` ticks into its on_enter."""

    def __init__(self, world: AudioWorld, task_id: str, n: int) -> None:
        super().__init__(instructions=f"You are {task_id}.", tools=[world.tool])
        self._id = task_id
        self.world = world
        self.n = n

    async def on_enter(self) -> None:
        self.world.probe.agent_event(self, "enter")
        await ticks(self.n)
        if not self.done():
            self.world.journal.completed_tasks[self.id] = self.world.probe._next()
            self.complete(f"{self.id} done")
        self.world.probe.agent_event(self, "entered")

    async def on_exit(self) -> None:
        self.world.probe.agent_event(self, "exit")
        self.world.probe.agent_event(self, "exited")

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        self.world.heard(self, new_message)


class AudioWorld:
    def __init__(self, sc: AudioScenario, probe: Probe, journal: SpokenJournal) -> None:
        self.sc = sc
        self.probe = probe
        self.journal = journal
        self.n_agents = 0
        self.planned: set[int] = set()
        self.tool = function_tool(self._handoff_tool, name="handoff", description="Run the turn's step.")
        self.model: llm.LLM[Any] | llm.RealtimeModel
        if sc.kind == "pipeline":
            self.model = _ProbedLLM(probe, fallback=self._answer_llm)
        else:
            self.model = _ProbedRealtimeModel(
                probe,
                fallback=self._answer_rt,
                auto_tool_reply_generation=sc.auto_tool_reply,
                reuse=sc.reuse,
                turn_detection=True,
                user_transcription=True,
            )

    def new_agent(self, chat_ctx: llm.ChatContext | None = None) -> SpokenAgent:
        agent_id = f"agent_{self.n_agents}"
        self.n_agents += 1
        if chat_ctx is not None:
            self.probe.carries_on.add(agent_id)
        return SpokenAgent(self, agent_id, chat_ctx=chat_ctx)

    def heard(self, agent: Agent, message: llm.ChatMessage) -> None:
        for t in inv.turn_ids(message.text_content):
            self.journal.heard.setdefault(t, []).append(agent.id)

    def handing_off(self, agent_id: str) -> None:
        self.journal.handoffs.append((self.probe._next(), agent_id))

    def _answer(
        self,
        chat_ctx: llm.ChatContext,
        asker: str,
        rid: str,
        *,
        instructed: bool,
        tools: bool = True,
        saying: tuple[Reply, ...] = (),
    ) -> Reply:
        """Like a model would: answer the newest user turn of the context that nothing in it
        answered yet (a tool reply too: the turn may have ended while the tools ran), unless
        asked with instructions (a greeting). Newest, not last: a turn handed over may sit
        before the arriving agent's own items (context order is creation time). ``saying``:
        replies of the same realtime session still under way, which its context holds too."""
        speech = getattr(current_speech(), "id", None)
        if speech is not None:
            self.journal.last_request[speech] = rid
        said = [i for i in chat_ctx.items if _said(i)]
        done: set[int] = set()
        for i in said:
            if i.type == "message" and i.role == "assistant":
                done.update(_answered_by(i.text_content or ""))
            elif i.type == "function_call" and "/" in i.call_id:
                done.add(int(i.call_id.rsplit("/", 1)[1]))
        for reply in saying:
            done.update(_answered_by(reply.full_text))
            done.update(int(c.call_id.rsplit("/", 1)[1]) for c in reply.tool_calls if "/" in c.call_id)
        users = [inv.turn_ids(i.text_content) for i in said if i.type == "message" and i.role == "user"]
        # a turn older than one answered is behind the conversation: superseded, not pending
        pending = [u for u in users if u and min(u) > max(done, default=-1)]
        if instructed or not pending:
            if not instructed and (followed := _tool_reply_to(said)):
                # the reply to the tool outputs of calls that answered a turn concludes that
                # answer, and says so, as a model's would: an agent the context is merged into
                # without the calls (AgentTask's preserve_function_call_history=False) reads
                # the turn as answered, not as a question still open
                return Reply(text=f"{asker}{FOLLOWS_UP}" + " ".join(f"turn {t}" for t in followed))
            return Reply(text=f"{asker} says ok")
        turns = max(pending, key=max)
        self.journal.requests.append(TurnRequest(self.probe._next(), rid, asker, turns, speech))
        turn = max(turns)
        if tools and turn < len(self.sc.turns) and turn not in self.planned:
            self.planned.add(turn)
            if self.sc.turns[turn].answer in ("agent", "agent_text", "task"):
                call_id = f"{rid}/{turn}"
                self.probe.issued[call_id] = asker
                return Reply(tool_calls=[tool_call("handoff", {"turn": turn}, call_id=call_id)])
        return Reply(text=f"{asker} answers " + " ".join(f"turn {t}" for t in turns))

    def _answer_llm(self, call: LLMCall) -> Reply:
        items = call.chat_ctx.items
        # generate_reply(instructions=...) ends the context with a system message of its own
        instructed = len(items) > 1 and items[-1].type == "message" and items[-1].role == "system"
        speech = getattr(current_speech(), "id", None)
        rid = f"{speech}#{call.index}"
        asker = getattr(call.agent, "id", "someone")
        reply = self._answer(
            call.chat_ctx, asker, rid, instructed=instructed, tools=call.tool_choice != "none"
        )
        ticks_ = self.sc.model_ticks
        return dataclasses.replace(reply, first_token_delay=(lambda: ticks(ticks_)) if ticks_ else None)

    def _answer_rt(self, gen: RTGeneration) -> Reply:
        agent = gen.agent if gen.agent is not None else current_agent()
        rid = gen.message_id or f"rt-{gen.index}"
        # a server generates one response after the other in a session, each with the ones
        # before it in its context, also while they still stream. The scripted session snapshots
        # its context when a generation is created, and adds a reply to it once its streams
        # closed: a reply asked for (a tool output's, typed input's) while the model still
        # answered a turn sees that answer, as a model would, unless it was interrupted
        generations = gen.session._model.generations
        saying = tuple(
            g.reply
            for g in (generations[i] for i in gen.under_way)
            if g.reply is not None and not g.interrupt_requested
        )
        return self._answer(
            gen.chat_ctx,
            getattr(agent, "id", "model"),
            rid,
            instructed=gen.extra_instructions is not None,
            saying=saying,
        )

    async def _handoff_tool(self, ctx: RunContext, turn: int) -> Any:
        step = self.sc.turns[turn]
        self.probe.tool_started()
        try:
            if step.answer == "task":
                task = SpokenTask(self, f"task_{turn}", step.answer_ticks)
                self.handing_off(task.id)
                return await task
            await ticks(step.answer_ticks)
            issuer = current_agent()
            agent = self.new_agent(issuer.chat_ctx if self.sc.carry and issuer is not None else None)
            self.handing_off(agent.id)
            self.probe.handoff_calls[ctx.function_call.call_id] = agent.id
            return agent if step.answer == "agent" else (agent, f"{inv.HANDOFF_MESSAGE} turn {turn}")
        finally:
            self.probe.tool_finished()


# -- the caller --


class _Abandoned(Exception):
    """The turn could not go on: no audio recognition / realtime session to speak to for 1 s."""


async def _retry(step: Any) -> Any:
    """``step()``, retried every millisecond while the session has nothing open to take it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 1.0
    while True:
        try:
            return step()
        except AssertionError:
            if loop.time() > deadline:
                raise _Abandoned() from None
            await asyncio.sleep(0.001)


async def speak_pipeline(caller: Caller, turn: SpokenTurn, text: str) -> None:
    def start() -> None:
        caller.audio.push(3)
        caller.vad.start_of_speech()

    await _retry(start)
    for k in range(turn.interims):
        await ticks(turn.gaps[0])
        caller.audio.push(2)
        await _retry(lambda k=k: caller.stt.interim(" ".join(text.split()[: k + 1])))
    await ticks(turn.gaps[1])
    caller.audio.push(2)
    await _retry(caller.vad.end_of_speech)
    await ticks(turn.gaps[2])
    await _retry(lambda: caller.stt.final(text))


def _live_rt(model: _ProbedRealtimeModel) -> ScriptedRealtimeSession:
    live = model.live_sessions
    if not live:
        raise AssertionError("no realtime session is open")
    return live[-1]


RESPEAK_LIMIT = 4
"""Sessions a realtime turn goes on to when the one hearing it closes before the caller stopped
speaking (:func:`speak_realtime`)."""


async def speak_realtime(model: _ProbedRealtimeModel, turn: SpokenTurn, text: str) -> None:
    """The caller speaks ``text`` to the realtime session that hears them. Once their speech
    stopped the session that heard it holds the whole turn: if it closes before its transcript
    and reply came, the turn is abandoned (it took the audio with it). A session that closes
    while the caller still speaks hears only the start: the turn goes on on the next one."""
    from livekit.agents.utils import shortuuid

    for _ in range(RESPEAK_LIMIT):
        rt = await _retry(lambda: _live_rt(model))
        rt.emit("input_speech_started", llm.InputSpeechStartedEvent())
        await ticks(turn.gaps[0])
        if not rt.closed:
            break
        # the session closed while the caller spoke (a handoff replaced it): the rest of
        # the caller's audio goes to the session that hears it now (the framework forwards
        # it to the arriving agent), whose server hears a turn start there
    else:
        raise _Abandoned()
    rt.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
    await ticks(turn.gaps[1])
    if rt.closed:
        raise _Abandoned()
    item_id = shortuuid("fake_user_")
    rt._chat_ctx.add_message(role="user", content=text, id=item_id)

    def transcribed() -> None:
        rt.emit(
            "input_audio_transcription_completed",
            llm.InputTranscriptionCompleted(item_id=item_id, transcript=text, is_final=True),
        )

    first, second = (
        (transcribed, rt.emit_generation) if turn.transcript_first else (rt.emit_generation, transcribed)
    )
    first()
    await ticks(turn.gaps[2])
    if not rt.closed:
        second()


# -- one scenario --


async def _after(n: int, action: Any) -> Any:
    await ticks(n)
    return action()


async def run_scenario(sc: AudioScenario) -> list[Violation]:
    probe = Probe()
    journal = SpokenJournal(probe, hooks=sc.kind == "pipeline")
    used = {"task"} if any(t.answer == "task" for t in sc.turns) else set()
    if used and sc.kind == "realtime":
        used.add("realtime")
    hygiene = ScenarioHygiene(
        pattern for cause, pattern in ALLOWED_ERRORS.items() if set(cause.split("+")) <= used
    )
    hygiene.install()
    out: list[Violation] = []
    pending: list[asyncio.Future[Any]] = []
    try:
        world = AudioWorld(sc, probe, journal)
        caller = Caller()
        if sc.kind == "pipeline":
            kwargs = caller.session_kwargs(llm=world.model)
            kwargs.pop("audio_input")
            if sc.audio_out:
                kwargs["tts"] = FakeTTS()
        else:
            kwargs = offline_session_kwargs(llm=world.model)
        session: AgentSession[Any] = AgentSession(**kwargs)
        if sc.kind == "pipeline":
            session.input.audio = caller.audio
            if sc.audio_out:
                session.output.audio = FakeAudioOutput(mode="realtime", speed=20.0)
        caller.attach(session)

        def on_transcribed(ev: Any) -> None:
            if ev.is_final:
                for t in inv.turn_ids(ev.transcript):
                    journal.finals.setdefault(t, probe._next())

        def on_item(ev: Any) -> None:
            item = ev.item
            speech = current_speech()
            if item.type == "message" and item.role == "assistant" and speech is not None:
                # the reply that played is the speech's last request (a tool reply after the calls)
                journal.reply_items.setdefault(item.id, journal.last_request.get(speech.id, speech.id))

        session.on("user_input_transcribed", on_transcribed)
        session.on("conversation_item_added", on_item)
        session.on("speech_created", lambda ev: probe.speech_created(ev.speech_handle.id))
        await session.start(world.new_agent(), record=False)

        closing: asyncio.Future[Any] | None = None
        for i, turn in enumerate(sc.turns):
            if turn.wait:
                if not await _settle(session, probe):
                    out.append(Violation("settles", f"before turn {i}: tools running: {probe.tools_running}"))
                journal.waits.append(probe._next())
            else:
                await ticks(turn.ticks)
            journal.speech_started[i] = probe._next()
            try:
                if sc.kind == "pipeline":
                    await speak_pipeline(caller, turn, f"turn {i}")
                else:
                    await speak_realtime(world.model, turn, f"turn {i}")  # type: ignore[arg-type]
            except _Abandoned:
                pass
            if turn.answer == "update_agent":

                def update() -> None:
                    agent = world.new_agent()
                    world.handing_off(agent.id)
                    session.update_agent(agent)

                pending.append(asyncio.ensure_future(_after(turn.answer_ticks, update)))
            elif turn.answer == "close":

                def close() -> asyncio.Future[Any]:
                    journal.closed_at = probe._next()
                    return asyncio.ensure_future(session.aclose())

                await ticks(turn.answer_ticks)
                closing = close()
                break

        for fut in pending:
            await _within(fut, inv.RUN_BOUND)
            if fut.done() and not fut.cancelled() and fut.exception() is not None:
                out.append(Violation("driver_ok", f"update_agent() raised {fut.exception()!r}"))
        if closing is None:
            if not await _settle(session, probe):
                out.append(Violation("settles", f"tools running: {probe.tools_running}"))
            out += inv.check_active(probe, session, closed=False)
            if sc.kind == "pipeline" and caller.stt.frames < caller.audio.frames_pushed:
                pushed = caller.audio.frames_pushed
                lost = pushed - caller.stt.frames
                what = f"{lost} of the caller's {pushed} audio frames never reached the STT"
                out.append(Violation("no_lost_user_turn", what))
            closing = asyncio.ensure_future(session.aclose())
        finished, exc = await _within(closing, inv.CLOSE_BOUND)
        if not finished or exc is not None:
            out.append(Violation("aclose_returns", f"finished={finished} raised={exc!r}"))
        caller.audio.close()
        out += inv.check_active(probe, session, closed=True)
        out += inv.check_enter_exit(probe)
        out += inv.check_late_generations(probe)
        out += inv.check_history(session)
        items = list(session.history.items)
        out += inv.check_spoken_turns(journal, items)
        out += inv.check_answering_agent(journal, items)
    finally:
        await hygiene.close()
    out += hygiene.violations()
    return out
