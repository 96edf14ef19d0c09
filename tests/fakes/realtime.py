"""ScriptedRealtimeModel / ScriptedRealtimeSession: a deterministic ``llm.RealtimeModel``.

The model owns one script (shared by all its sessions, so a conversation spanning agent
handoffs is scripted in one place) and a registry of every session it created.
Each reply the framework requests with ``generate_reply()`` consumes the next script item
(see :mod:`tests.fakes.script`). A test can also make the model produce a generation on
its own with :meth:`ScriptedRealtimeSession.emit_generation` (``user_initiated=False``,
like a server-side turn) or simulate a whole user voice turn with
:meth:`ScriptedRealtimeSession.simulate_user_turn`.

Every method the framework calls on a session, and every read of its ``chat_ctx``/``tools``
properties (``kind="property"``), is journaled (:class:`RTJournalEntry`) in ``model.journal``
and ``session.journal``, including accesses after that session's ``aclose()``
(``after_close=True``). ``model.calls(method)`` / ``session.calls`` skip property reads.

Capabilities default to a text-only model with fully mutable state and no server-side turn
detection; override any field by keyword, e.g.
``ScriptedRealtimeModel(mutable_instructions=False, auto_tool_reply_generation=True)``.
``reuse=`` sets the three ``mutable_*`` capabilities at once: with ``reuse=True`` the framework
keeps the realtime session across a handoff, with ``reuse=False`` it replaces it (unless the
arriving agent has the same context, instructions and tools). :data:`GEMINI_CAPABILITIES` are
the overrides of the google plugin's Gemini Live model.
When ``auto_tool_reply_generation`` is on, a session answers new function-call outputs
pushed with ``update_chat_ctx`` by emitting the next script item as its own generation.

Exhaustion policy as for ``ScriptedLLM``: without ``fallback`` a ``generate_reply`` beyond
the script fails its future with ``ScriptExhaustedError`` (the framework logs it at ERROR);
an auto reply or ``emit_generation`` beyond the script logs an ERROR on ``livekit.testfakes``
(``emit_generation`` also raises). Both fail the test through the hygiene fixture.

:func:`scripted_model` builds the model of a test run on the pipeline LLM and on both kinds of
realtime session (``kind`` one of :data:`MODEL_KINDS`); :func:`late_calls` lists the calls
that reached a session after its ``aclose()``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from livekit import rtc
from livekit.agents import llm, utils
from livekit.agents.llm import ChatContext, RealtimeCapabilities
from livekit.agents.types import NOT_GIVEN, NotGivenOr

from .llm import LLMCall, ScriptedLLM, current_agent, snapshot_chat_ctx, tool_names
from .script import (
    Reply,
    Script,
    ScriptExhaustedError,
    ScriptItem,
    apply_delay,
    fakes_logger,
    resolve_item,
)

__all__ = [
    "GEMINI_CAPABILITIES",
    "MODEL_KINDS",
    "FirstCloseHookModel",
    "RTGeneration",
    "RTJournalEntry",
    "ScriptedRealtimeModel",
    "ScriptedRealtimeSession",
    "default_realtime_capabilities",
    "late_calls",
    "scripted_model",
]


def default_realtime_capabilities(**overrides: Any) -> RealtimeCapabilities:
    """Text-only, fully mutable, no server turn detection; ``overrides`` replace fields."""
    caps = RealtimeCapabilities(
        message_truncation=False,
        turn_detection=False,
        user_transcription=False,
        auto_tool_reply_generation=False,
        audio_output=False,
        manual_function_calls=True,
        mutable_chat_context=True,
        mutable_instructions=True,
        mutable_tools=True,
    )
    return dataclasses.replace(caps, **overrides)


GEMINI_CAPABILITIES: dict[str, Any] = {
    "turn_detection": True,
    "user_transcription": True,
    "auto_tool_reply_generation": True,
    "audio_output": True,
    "manual_function_calls": False,
    "mutable_chat_context": True,
    "mutable_instructions": True,
    "mutable_tools": False,
    "per_response_tool_choice": False,
}
"""RealtimeCapabilities of livekit-plugins-google 1.8.9's RealtimeModel with default options, as
overrides: ``ScriptedRealtimeModel(script, **GEMINI_CAPABILITIES)``."""


@dataclass
class RTJournalEntry:
    """One framework call on a session."""

    seq: int
    """Model-wide order of the call."""
    session: ScriptedRealtimeSession
    method: str
    args: dict[str, Any]
    """Short summary of the arguments (names, counts, texts), not the objects themselves."""
    after_close: bool
    """The session's ``aclose()`` had already been called."""
    kind: Literal["call", "property"] = "call"
    """``property`` for reads of ``chat_ctx`` / ``tools``."""

    def __repr__(self) -> str:
        late = " AFTER CLOSE" if self.after_close else ""
        call = "" if self.kind == "property" else f"({self.args})"
        return f"<#{self.seq} s{self.session.index}.{self.method}{call}{late}>"


@dataclass
class RTGeneration:
    """One generation (reply) produced by a session."""

    index: int
    """0-based model-wide position."""
    session: ScriptedRealtimeSession
    source: Literal["generate_reply", "emit_generation", "auto_tool_reply", "say"]
    user_initiated: bool
    chat_ctx: ChatContext
    """Deep snapshot of the session's context when the generation was requested."""
    instructions: str | None
    tools: list[str]
    tool_choice: llm.ToolChoice | None
    """Per-response tool_choice if given, else the session-level one."""
    extra_instructions: str | None
    """``instructions=`` passed to ``generate_reply``."""
    agent: Any | None
    """Agent whose activity asked for it (best effort; None for model-initiated ones)."""
    scripted: bool
    reply: Reply | None = None
    message_id: str | None = None
    """Id of the assistant message the generation streams (as a server would announce it)."""
    outcome: Literal["pending", "completed", "interrupted", "error"] = "pending"
    under_way: tuple[int, ...] = ()
    """Indexes of this session's generations still under way when this one was created (not
    interrupted, not completed, their text not read to its end yet): what they say is not in
    ``chat_ctx``. The session adds a reply to its context once it completed, read or not (a
    server generates it either way), or, interrupted, what the framework read of it."""
    interrupt_requested: bool = False
    """``interrupt()`` reached it (the session's or the session closing), also while its streams
    are still open (``outcome`` says how it ended once they closed)."""
    done: asyncio.Future[str] = field(default_factory=asyncio.Future, repr=False)
    """Resolves with the outcome once the generation's streams are finished (never raises)."""

    @property
    def last_user_text(self) -> str | None:
        """The text of the last user message of ``chat_ctx`` (``None`` when there is none)."""
        users = [i for i in self.chat_ctx.items if i.type == "message" and i.role == "user"]
        return users[-1].text_content if users else None

    def _finish(self, outcome: Literal["completed", "interrupted", "error"]) -> None:
        if self.outcome == "pending":
            self.outcome = outcome
        if not self.done.done():
            self.done.set_result(self.outcome)


class ScriptedRealtimeModel(llm.RealtimeModel):
    """A realtime model answering from a script; see module docs."""

    def __init__(
        self,
        script: Iterable[ScriptItem[RTGeneration]] = (),
        *,
        fallback: ScriptItem[RTGeneration] | None = None,
        capabilities: RealtimeCapabilities | None = None,
        seconds_per_char: float = 0.01,
        reuse: bool | None = None,
        **capability_overrides: Any,
    ) -> None:
        if reuse is not None:
            mutable = ("mutable_chat_context", "mutable_instructions", "mutable_tools")
            if clash := [name for name in mutable if name in capability_overrides]:
                raise TypeError(f"reuse= already sets {', '.join(clash)}")
            capability_overrides.update(dict.fromkeys(mutable, reuse))
        if capabilities is None:
            capabilities = default_realtime_capabilities(**capability_overrides)
        elif capability_overrides:
            capabilities = dataclasses.replace(capabilities, **capability_overrides)
        super().__init__(capabilities=capabilities)
        self.script: Script[RTGeneration] = Script(script, fallback=fallback, owner="ScriptedRealtimeModel")
        self.seconds_per_char = seconds_per_char
        """Audio duration per character when ``capabilities.audio_output`` is on."""
        self.sessions: list[ScriptedRealtimeSession] = []
        self.journal: list[RTJournalEntry] = []
        self.generations: list[RTGeneration] = []
        self.closed = False

    @property
    def model(self) -> str:
        return "scripted-realtime"

    @property
    def provider(self) -> str:
        return "fake"

    def push(self, *items: ScriptItem[RTGeneration]) -> None:
        self.script.push(*items)

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = ScriptedRealtimeSession(
            self, index=len(self.sessions), turn_detection_disabled=turn_detection_disabled
        )
        self.sessions.append(sess)
        return sess

    @property
    def live_sessions(self) -> list[ScriptedRealtimeSession]:
        return [s for s in self.sessions if not s.closed]

    def calls(self, method: str | None = None) -> list[RTJournalEntry]:
        """Journaled method calls (property reads excluded), optionally of one method."""
        return [e for e in self.journal if e.kind == "call" and (method is None or e.method == method)]

    async def aclose(self) -> None:
        self.closed = True


MODEL_KINDS = ("pipeline", "realtime-reused", "realtime-replaced")
"""The ``kind`` values of :func:`scripted_model`, to parametrize a test over."""


class FirstCloseHookModel(ScriptedRealtimeModel):
    """A :class:`ScriptedRealtimeModel` that calls ``on_first_close`` (once, then forgets it)
    when the first of its sessions to be closed starts closing: a test acts at that moment, e.g.
    hands off while a model that cannot be updated closes the paused agent's session."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_first_close: Callable[[], None] | None = None

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = super().session(turn_detection_disabled=turn_detection_disabled)
        aclose = sess.aclose

        async def watched() -> None:
            if (hook := self.on_first_close) is not None:
                self.on_first_close = None
                hook()
            await aclose()

        sess.aclose = watched  # type: ignore[method-assign]
        return sess


def scripted_model(
    kind: str,
    script: Iterable[ScriptItem[LLMCall | RTGeneration]] = (),
    *,
    fallback: ScriptItem[LLMCall | RTGeneration] | None = None,
) -> ScriptedLLM | ScriptedRealtimeModel:
    """The model of one of :data:`MODEL_KINDS`: ``"pipeline"``, a :class:`ScriptedLLM`;
    ``"realtime-reused"`` / ``"realtime-replaced"``, a :class:`ScriptedRealtimeModel` with the
    default capabilities (so manual function calls, which an ``AgentTask`` awaited inside a
    tool needs) and ``reuse=True`` / ``False``."""
    if kind == "pipeline":
        return ScriptedLLM(script, fallback=fallback)
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}, expected one of {MODEL_KINDS}")
    return ScriptedRealtimeModel(script, fallback=fallback, reuse=kind == "realtime-reused")


def late_calls(model: ScriptedLLM | ScriptedRealtimeModel) -> list[RTJournalEntry]:
    """The calls the framework made on a realtime session after its ``aclose()`` (the
    ``aclose()`` calls themselves and property reads excepted); none for a pipeline LLM, which
    has no session to close."""
    if isinstance(model, ScriptedLLM):
        return []
    return [e for e in model.journal if e.after_close and e.kind == "call" and e.method != "aclose"]


class ScriptedRealtimeSession(llm.RealtimeSession[Any]):
    """Session of :class:`ScriptedRealtimeModel`; keeps instructions/chat_ctx/tools locally."""

    def __init__(self, model: ScriptedRealtimeModel, *, index: int, turn_detection_disabled: bool) -> None:
        super().__init__(model)
        self._model = model
        self.index = index
        self.turn_detection_disabled = turn_detection_disabled
        self.closed = False
        self.journal: list[RTJournalEntry] = []
        self.instructions: str | None = None
        self.tool_choice: llm.ToolChoice | None = None
        self._chat_ctx = ChatContext.empty()
        self._tools = llm.ToolContext.empty()
        self._active: set[_Generation] = set()
        self._under_way: set[_Generation] = set()
        self._truncated: dict[str, str] = {}
        self._kept_by: dict[str, int] = {}
        """Ids of the items generations added to ``_chat_ctx``, with the generation's index."""
        self._history_given = False
        """Whether the session got its first context: the history it starts from."""

    def __repr__(self) -> str:
        return f"ScriptedRealtimeSession(#{self.index}, closed={self.closed})"

    # -- journal --

    def _record(self, method: str, *, _kind: Literal["call", "property"] = "call", **args: Any) -> None:
        entry = RTJournalEntry(
            seq=len(self._model.journal),
            session=self,
            method=method,
            args=args,
            after_close=self.closed,
            kind=_kind,
        )
        self._model.journal.append(entry)
        self.journal.append(entry)

    # -- RealtimeSession API --

    @property
    def chat_ctx(self) -> ChatContext:
        self._record("chat_ctx", _kind="property")
        return self._chat_ctx.copy()

    @property
    def tools(self) -> llm.ToolContext:
        self._record("tools", _kind="property")
        return llm.ToolContext(self._tools.flatten())

    @property
    def calls(self) -> list[RTJournalEntry]:
        """This session's journal without property reads."""
        return [e for e in self.journal if e.kind == "call"]

    async def update_instructions(self, instructions: str) -> None:
        self._record("update_instructions", instructions=instructions)
        self.instructions = instructions

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        known = {item.id for item in self._chat_ctx.items}
        new_outputs = [
            item for item in chat_ctx.items if item.type == "function_call_output" and item.id not in known
        ]
        self._record(
            "update_chat_ctx",
            items=len(chat_ctx.items),
            types=[item.type for item in chat_ctx.items],
            new_function_outputs=[item.name for item in new_outputs],
        )
        self._chat_ctx = snapshot_chat_ctx(chat_ctx)
        # the first context a session gets is the history it starts from: a server answers
        # the results of calls it awaits, and a new session awaits none (Gemini Live and Nova
        # Sonic send that history as turns, not as tool responses)
        history, self._history_given = not self._history_given, True
        if (
            new_outputs
            and not history
            and not self.closed
            and self._model.capabilities.auto_tool_reply_generation
        ):
            asyncio.get_running_loop().call_soon(self._auto_tool_reply)

    async def update_tools(self, tools: list[llm.Tool]) -> None:
        self._record("update_tools", tools=tool_names(tools))
        self._tools = llm.ToolContext(tools)

    def update_options(self, *, tool_choice: NotGivenOr[llm.ToolChoice | None] = NOT_GIVEN) -> None:
        self._record("update_options", tool_choice=tool_choice if tool_choice else None)
        if tool_choice is not NOT_GIVEN:
            self.tool_choice = tool_choice if isinstance(tool_choice, (str, dict)) else None

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        self._record("push_audio", duration=frame.duration)

    def push_video(self, frame: rtc.VideoFrame) -> None:
        self._record("push_video")

    def generate_reply(
        self,
        *,
        instructions: NotGivenOr[str] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        tools: NotGivenOr[list[llm.Tool]] = NOT_GIVEN,
    ) -> asyncio.Future[llm.GenerationCreatedEvent]:
        self._record(
            "generate_reply",
            instructions=instructions if isinstance(instructions, str) else None,
            tool_choice=tool_choice if isinstance(tool_choice, (str, dict)) else None,
            tools=tool_names(tools) if isinstance(tools, list) else None,
        )
        fut: asyncio.Future[llm.GenerationCreatedEvent] = asyncio.get_running_loop().create_future()
        item, scripted = self._model.script.next()
        gen = self._new_generation(
            source="generate_reply",
            user_initiated=True,
            scripted=scripted,
            extra_instructions=instructions if isinstance(instructions, str) else None,
            tool_choice=tool_choice if isinstance(tool_choice, (str, dict)) else None,
            tools=tools if isinstance(tools, list) else None,
        )
        if item is None:
            gen._finish("error")
            fut.set_exception(
                self._model.script.exhausted_error(
                    f"generate_reply #{gen.index} on session #{self.index}, instructions={gen.instructions!r}"
                )
            )
            return fut
        fut.set_result(_Generation(self, gen, item).event())
        return fut

    def say(self, text: str | AsyncIterable[str]) -> asyncio.Future[llm.GenerationCreatedEvent]:
        if not self._model.capabilities.supports_say:
            return super().say(text)
        self._record("say", text=text if isinstance(text, str) else "<stream>")
        gen = self._new_generation(source="say", user_initiated=True, scripted=True)

        async def _as_reply(_: RTGeneration) -> Reply:
            if isinstance(text, str):
                return Reply(text=text)
            return Reply(text=[chunk async for chunk in text])

        fut: asyncio.Future[llm.GenerationCreatedEvent] = asyncio.get_running_loop().create_future()
        fut.set_result(_Generation(self, gen, _as_reply).event())
        return fut

    def commit_audio(self) -> None:
        self._record("commit_audio")

    def clear_audio(self) -> None:
        self._record("clear_audio")

    def interrupt(self) -> None:
        self._record("interrupt", active_generations=len(self._active))
        for g in list(self._active):
            g.interrupt()

    def truncate(
        self,
        *,
        message_id: str,
        modalities: list[Literal["text", "audio"]],
        audio_end_ms: int,
        audio_transcript: NotGivenOr[str] = NOT_GIVEN,
    ) -> None:
        self._record(
            "truncate",
            message_id=message_id,
            audio_end_ms=audio_end_ms,
            audio_transcript=audio_transcript if isinstance(audio_transcript, str) else None,
        )
        if isinstance(audio_transcript, str):
            # like a server: what the caller did not hear of the message leaves the context
            self._truncated[message_id] = audio_transcript
            if isinstance(msg := self._chat_ctx.get_by_id(message_id), llm.ChatMessage):
                msg.content = [audio_transcript]

    def start_user_activity(self) -> None:
        self._record("start_user_activity")

    async def aclose(self) -> None:
        self._record("aclose")
        self.closed = True
        for g in list(self._active):
            g.interrupt()

    # -- test triggers --

    def emit_generation(
        self, reply: ScriptItem[RTGeneration] | None = None, *, user_initiated: bool = False
    ) -> RTGeneration:
        """Make the model produce a generation on its own (emits ``generation_created``).

        ``reply=None`` consumes the next script item. Returns the recorded generation.
        """
        return self._emit(reply, source="emit_generation", user_initiated=user_initiated)

    def simulate_user_turn(
        self,
        transcript: str,
        *,
        respond: bool = True,
        reply: ScriptItem[RTGeneration] | None = None,
        transcript_first: bool = True,
    ) -> RTGeneration | None:
        """Simulate a user voice turn detected server-side: speech started/stopped, the final
        transcript, then (if ``respond``) the model's own reply generation. With
        ``transcript_first=False`` the reply is created before the transcript comes in, as
        providers that transcribe the input asynchronously do."""
        item_id = utils.shortuuid("fake_user_")
        self.emit("input_speech_started", llm.InputSpeechStartedEvent())
        self.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(user_transcription_enabled=True))
        self._chat_ctx.add_message(role="user", content=transcript, id=item_id)

        def transcribed() -> None:
            self.emit(
                "input_audio_transcription_completed",
                llm.InputTranscriptionCompleted(item_id=item_id, transcript=transcript, is_final=True),
            )

        if transcript_first or not respond:
            transcribed()
        if not respond:
            return None
        gen = self._emit(reply, source="emit_generation", user_initiated=False)
        if not transcript_first:
            transcribed()
        return gen

    # -- internals --

    def _auto_tool_reply(self) -> None:
        if self.closed:
            return
        try:
            self._emit(None, source="auto_tool_reply", user_initiated=False)
        except ScriptExhaustedError:
            pass  # already logged by _emit

    def _emit(
        self,
        reply: ScriptItem[RTGeneration] | None,
        *,
        source: Literal["emit_generation", "auto_tool_reply"],
        user_initiated: bool,
    ) -> RTGeneration:
        if reply is not None:
            item: ScriptItem[RTGeneration] | None = reply
            scripted = True
        else:
            item, scripted = self._model.script.next()
        gen = self._new_generation(source=source, user_initiated=user_initiated, scripted=scripted)
        if item is None:
            gen._finish("error")
            err = self._model.script.exhausted_error(f"{source} #{gen.index} on session #{self.index}")
            fakes_logger.error("%s", err)
            raise err
        self.emit("generation_created", _Generation(self, gen, item).event())
        return gen

    def _new_generation(
        self,
        *,
        source: Literal["generate_reply", "emit_generation", "auto_tool_reply", "say"],
        user_initiated: bool,
        scripted: bool,
        extra_instructions: str | None = None,
        tool_choice: llm.ToolChoice | None = None,
        tools: list[llm.Tool] | None = None,
    ) -> RTGeneration:
        gen = RTGeneration(
            index=len(self._model.generations),
            session=self,
            source=source,
            user_initiated=user_initiated,
            chat_ctx=snapshot_chat_ctx(self._chat_ctx),
            instructions=self.instructions,
            tools=tool_names(tools) if tools is not None else list(self._tools.function_tools),
            tool_choice=tool_choice if tool_choice is not None else self.tool_choice,
            extra_instructions=extra_instructions,
            agent=current_agent() if source in ("generate_reply", "say") else None,
            scripted=scripted,
            under_way=tuple(sorted(g.record.index for g in self._under_way)),
        )
        self._model.generations.append(gen)
        return gen


class _Generation:
    """Streams of one generation. No background tasks: the streams are async generators
    consumed by the framework, waiting on the reply's hold/delay and on interruption."""

    def __init__(
        self,
        session: ScriptedRealtimeSession,
        record: RTGeneration,
        item: ScriptItem[RTGeneration],
    ) -> None:
        self._session = session
        self.record = record
        self._item = item
        self._interrupted = asyncio.Event()
        self._resolve_lock = asyncio.Lock()
        self._resolved: asyncio.Future[Reply | None] = asyncio.get_running_loop().create_future()
        self._open_streams = 2
        self._message_id = utils.shortuuid("fake_msg_")
        record.message_id = self._message_id
        self._text_sent: list[str] = []
        self._text_kept = False
        self._calls_sent: list[llm.FunctionCall] = []
        session._active.add(self)
        session._under_way.add(self)

    def event(self) -> llm.GenerationCreatedEvent:
        return llm.GenerationCreatedEvent(
            message_stream=self._messages(),
            function_stream=self._functions(),
            user_initiated=self.record.user_initiated,
            response_id=f"fake_resp_{self.record.index}",
        )

    def interrupt(self) -> None:
        self.record.interrupt_requested = True
        self._session._under_way.discard(self)
        self._interrupted.set()

    async def _until_interrupted(self, aw: Any) -> bool:
        """Await ``aw`` unless interrupted first; True if ``aw`` completed."""
        if self._interrupted.is_set():
            if asyncio.iscoroutine(aw):
                aw.close()
            return False
        main = asyncio.ensure_future(aw)
        stop = asyncio.ensure_future(self._interrupted.wait())
        try:
            await asyncio.wait({main, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await utils.aio.cancel_and_wait(main, stop)
        return main.done() and not main.cancelled() and not self._interrupted.is_set()

    async def _reply(self) -> Reply | None:
        """Resolve the item once (shared by both streams); None when interrupted first."""
        async with self._resolve_lock:
            if self._resolved.done():
                return self._resolved.result()
            reply: Reply | None = None
            try:
                reply = await resolve_item(self._item, self.record)
                self.record.reply = reply
                if reply.hold is not None and not await self._until_interrupted(reply.hold.wait()):
                    reply = None
                elif reply.first_token_delay is not None and not await self._until_interrupted(
                    apply_delay(reply.first_token_delay)
                ):
                    reply = None
            except BaseException:
                self.record._finish("error")
                self._resolved.set_result(None)
                raise
            self._resolved.set_result(reply)
            return reply

    async def _messages(self) -> AsyncIterator[llm.MessageGeneration]:
        try:
            reply = await self._reply()
            if reply is None or not reply.chunks or self._interrupted.is_set():
                self._session._under_way.discard(self)
                return
            audio = self._session._model.capabilities.audio_output
            modalities: asyncio.Future[list[Literal["text", "audio"]]] = (
                asyncio.get_running_loop().create_future()
            )
            modalities.set_result(["audio", "text"] if audio else ["text"])
            yield llm.MessageGeneration(
                message_id=self._message_id,
                text_stream=self._text(reply),
                audio_stream=self._audio(reply) if audio else _empty_audio(),
                modalities=modalities,
            )
        finally:
            self._stream_closed()

    async def _text(self, reply: Reply) -> AsyncIterator[str]:
        try:
            for chunk in reply.chunks:
                if self._interrupted.is_set():
                    return
                self._text_sent.append(chunk)
                yield chunk
        finally:
            # the framework reads the text after the message stream ended
            self._keep_text()

    async def _audio(self, reply: Reply) -> AsyncIterator[rtc.AudioFrame]:
        sample_rate = 24000
        for chunk in reply.chunks:
            if self._interrupted.is_set():
                return
            samples = max(1, int(len(chunk) * self._session._model.seconds_per_char * sample_rate))
            yield rtc.AudioFrame(
                data=b"\x00\x00" * samples,
                sample_rate=sample_rate,
                num_channels=1,
                samples_per_channel=samples,
            )

    async def _functions(self) -> AsyncIterator[llm.FunctionCall]:
        try:
            reply = await self._reply()
            if reply is None:
                return
            if reply.error is not None:
                raise reply.error
            for tc in reply.tool_calls:
                if self._interrupted.is_set():
                    return
                fnc = llm.FunctionCall(call_id=tc.call_id, name=tc.name, arguments=tc.arguments)
                self._calls_sent.append(fnc)
                yield fnc
        finally:
            self._stream_closed()

    def _stream_closed(self) -> None:
        self._open_streams -= 1
        if self._open_streams > 0:
            return
        self._session._active.discard(self)
        self._session._under_way.discard(self)
        # like a server, keep what was generated in the session's own context: all of a
        # response that completed, whether the client read its text or not (a server generates
        # it either way), what the client read of one interrupted (the part generated)
        reply = self.record.reply
        self._keep_text(
            "".join(reply.chunks) if reply is not None and not self._interrupted.is_set() else None
        )
        self._place(self._calls_sent)
        self.record._finish("interrupted" if self._interrupted.is_set() else "completed")

    def _keep_text(self, text: str | None = None) -> None:
        """Add the text generated so far to the session's context, once: when the streams
        closed, or when the text stream ended after them (it is read after the message stream
        ended); as truncated, if the framework truncated the message first. ``text``: the
        whole reply, generated (else the text the framework read of it)."""
        text = text or "".join(self._text_sent)
        if self._text_kept or not text:
            return
        self._session._under_way.discard(self)
        self._text_kept = True
        text = self._session._truncated.get(self._message_id, text)
        self._place([llm.ChatMessage(role="assistant", content=[text], id=self._message_id)])

    def _place(self, items: list[llm.ChatItem]) -> None:
        """Add ``items`` to the session's context in the order of the generations, as a server
        answers one response after the other: before what a generation created after this one
        (which completed first) added."""
        ctx_items = self._session._chat_ctx.items
        later = self._session._kept_by
        at = next(
            (k for k, i in enumerate(ctx_items) if later.get(i.id, -1) > self.record.index), len(ctx_items)
        )
        ctx_items[at:at] = items
        later.update(dict.fromkeys((i.id for i in items), self.record.index))


async def _empty_audio() -> AsyncIterator[rtc.AudioFrame]:
    return
    yield  # pragma: no cover
