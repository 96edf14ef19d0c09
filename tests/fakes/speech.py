"""Speech-side fakes: a caller whose spoken turns go through the session's real audio path.

* :class:`FakeAudioInput` is the session's ``input.audio``: the frames a test pushes are read by
  the session's own forwarding task and pushed into the current activity, which hands them to
  the VAD and STT streams it runs (the STT stream is the one the session reuses across
  handoffs).
* :class:`ScriptedVAD` and :class:`ScriptedSTT` consume those frames (they count them) but
  decide nothing: the start and end of speech, the interim and the final transcripts are
  events the test triggers, on the stream the session currently runs. No timer, no sleep.
* :class:`Caller` plays a spoken turn through the three, step by step, and waits for the
  session to have taken in each step (``user_state_changed``, ``user_input_transcribed``),
  so a test knows exactly where the turn is::

      caller = Caller()
      session = await make_session(agent, llm=fake, **caller.session_kwargs())
      await caller.say("I'd like a refund.")       # start, interim, end of speech, final
      # -> the session's end of turn runs now (endpointing delay 0): the turn is committed

:func:`speech_session_kwargs` is :func:`tests.fakes.session.offline_session_kwargs` with the
fakes plugged in: ``turn_detection="vad"`` (override it with ``"stt"`` or a turn detector),
endpointing delays of 0, VAD interruption (no adaptive detector, which needs a network), and
preemptive generation off unless a test asks for it, and no wait at close for a final
transcript nobody scripted.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from livekit import rtc
from livekit.agents import AgentSession, stt, utils, vad
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions, NotGivenOr
from livekit.agents.voice import io

from .session import offline_session_kwargs
from .sync import DEFAULT_TIMEOUT, bounded, wait_for_event

__all__ = [
    "Caller",
    "FakeAudioInput",
    "ScriptedSTT",
    "ScriptedVAD",
    "speech_session_kwargs",
]

SAMPLE_RATE = 16000
FRAME_SECONDS = 0.02


def _frame(seconds: float = FRAME_SECONDS) -> rtc.AudioFrame:
    samples = max(1, int(round(seconds * SAMPLE_RATE)))
    return rtc.AudioFrame(
        data=b"\x00\x00" * samples, sample_rate=SAMPLE_RATE, num_channels=1, samples_per_channel=samples
    )


class FakeAudioInput(io.AudioInput):
    """``session.input.audio``: yields the frames the test pushes, until :meth:`close`."""

    def __init__(self, *, label: str = "FakeAudioInput") -> None:
        super().__init__(label=label)
        self._frames: asyncio.Queue[rtc.AudioFrame | None] = asyncio.Queue()
        self._closed = False
        self.frames_pushed = 0
        # set while the session's reader waits on an empty queue: it took every frame pushed
        self._idle = asyncio.Event()

    def push(self, frames: int = 1, *, seconds: float = FRAME_SECONDS) -> None:
        """Push ``frames`` frames of (silent) caller audio, ``seconds`` (20 ms) each; a frame of
        another length tells a test where it is (:attr:`ScriptedRecognizeStream.sizes`)."""
        for _ in range(frames):
            self._frames.put_nowait(_frame(seconds))
            self.frames_pushed += 1
        self._idle.clear()

    async def forwarded(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Bounded: the session read every frame pushed so far and handed each to its current
        activity (``AgentActivity.push_audio()``: the reader pushes a frame before it reads on)."""
        await bounded(self._idle.wait(), timeout, what="the session reading the caller's audio")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._frames.put_nowait(None)

    async def __anext__(self) -> rtc.AudioFrame:
        if self._closed and self._frames.empty():
            raise StopAsyncIteration
        if self._frames.empty():
            self._idle.set()
        frame = await self._frames.get()
        if frame is None:
            raise StopAsyncIteration
        return frame


# -- VAD --


class ScriptedVAD(vad.VAD):
    """A VAD whose start and end of speech the test triggers; see the module docs."""

    def __init__(self, *, keep_closed_streams: bool = True) -> None:
        """``keep_closed_streams=False`` forgets a stream once it is closed, as a real VAD does
        (``inference.VAD`` keeps its streams in a ``WeakSet``): a test of what the session keeps
        alive must not count what the fake keeps (``frames`` still counts the closed streams')."""
        super().__init__(capabilities=vad.VADCapabilities(update_interval=FRAME_SECONDS))
        self.streams: list[ScriptedVADStream] = []
        self.keep_closed_streams = keep_closed_streams
        self._closed_frames = 0

    @property
    def model(self) -> str:
        return "scripted-vad"

    @property
    def provider(self) -> str:
        return "fake"

    def stream(self) -> ScriptedVADStream:
        stream = ScriptedVADStream(self)
        self.streams.append(stream)
        return stream

    @property
    def current(self) -> ScriptedVADStream:
        """The newest stream still open (the one the session's activity runs)."""
        for stream in reversed(self.streams):
            if not stream.closed:
                return stream
        raise AssertionError("no VAD stream is open: the session runs no audio recognition")

    @property
    def frames(self) -> int:
        """Audio frames every stream of this VAD received."""
        return self._closed_frames + sum(s.frames for s in self.streams)

    def _stream_closed(self, stream: ScriptedVADStream) -> None:
        if not self.keep_closed_streams and stream in self.streams:
            self.streams.remove(stream)
            self._closed_frames += stream.frames

    def start_of_speech(self) -> None:
        self.current.start_of_speech()

    def end_of_speech(self) -> None:
        self.current.end_of_speech()

    def inference_done(self, speech_duration: float) -> None:
        self.current.inference_done(speech_duration)


class ScriptedVADStream(vad.VADStream):
    _vad: ScriptedVAD

    def __init__(self, scripted: ScriptedVAD) -> None:
        super().__init__(scripted)
        self.frames = 0
        self._samples = 0
        self._speech_started_at: float | None = None

    @property
    def closed(self) -> bool:
        return self._event_ch.closed or self._input_ch.closed

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            self._vad._stream_closed(self)

    async def _main_task(self) -> None:
        async for item in self._input_ch:
            if isinstance(item, rtc.AudioFrame):
                self.frames += 1
                self._samples += item.samples_per_channel

    def _event(self, type: vad.VADEventType, *, speech_duration: float, speaking: bool) -> vad.VADEvent:
        return vad.VADEvent(
            type=type,
            samples_index=self._samples,
            timestamp=time.time(),
            speech_duration=speech_duration,
            silence_duration=0.0,
            speaking=speaking,
        )

    def start_of_speech(self) -> None:
        self._speech_started_at = time.time()
        self._event_ch.send_nowait(
            self._event(vad.VADEventType.START_OF_SPEECH, speech_duration=0.0, speaking=True)
        )

    def inference_done(self, speech_duration: float) -> None:
        """An inference result while the caller speaks: ``speech_duration`` of speech so far.
        A VAD sends these all along; the session's interruption by audio activity (pausing or
        interrupting what the agent says) acts on them, not on the start of speech, once the
        speech lasts ``interruption["min_duration"]``."""
        ev = self._event(vad.VADEventType.INFERENCE_DONE, speech_duration=speech_duration, speaking=True)
        ev.raw_accumulated_speech = speech_duration
        self._event_ch.send_nowait(ev)

    def end_of_speech(self) -> None:
        started = self._speech_started_at
        self._speech_started_at = None
        duration = time.time() - started if started is not None else 0.0
        self._event_ch.send_nowait(
            self._event(vad.VADEventType.END_OF_SPEECH, speech_duration=duration, speaking=False)
        )


# -- STT --


class ScriptedSTT(stt.STT):
    """A streaming STT whose speech events and transcripts the test triggers."""

    def __init__(self, *, language: str = "en") -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(streaming=True, interim_results=True, offline_recognize=False)
        )
        self.language = language
        self.streams: list[ScriptedRecognizeStream] = []

    @property
    def model(self) -> str:
        return "scripted-stt"

    @property
    def provider(self) -> str:
        return "fake"

    async def _recognize_impl(
        self,
        buffer: utils.AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        raise NotImplementedError("ScriptedSTT only streams")

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> ScriptedRecognizeStream:
        stream = ScriptedRecognizeStream(stt=self, conn_options=conn_options)
        self.streams.append(stream)
        return stream

    @property
    def current(self) -> ScriptedRecognizeStream:
        """The newest stream still open (the session reuses one across handoffs)."""
        for stream in reversed(self.streams):
            if not stream.closed:
                return stream
        raise AssertionError("no STT stream is open: the session runs no STT")

    @property
    def frames(self) -> int:
        return sum(s.frames for s in self.streams)

    def start_of_speech(self) -> None:
        self.current.send(stt.SpeechEventType.START_OF_SPEECH)

    def interim(self, text: str) -> None:
        self.current.send(stt.SpeechEventType.INTERIM_TRANSCRIPT, text)

    def final(self, text: str) -> None:
        self.current.send(stt.SpeechEventType.FINAL_TRANSCRIPT, text)

    def end_of_speech(self) -> None:
        self.current.send(stt.SpeechEventType.END_OF_SPEECH)


class ScriptedRecognizeStream(stt.RecognizeStream):
    _stt: ScriptedSTT

    def __init__(self, *, stt: ScriptedSTT, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=stt, conn_options=conn_options)
        self.frames = 0
        self.sizes: list[int] = []
        """``samples_per_channel`` of each frame received, in order."""
        self._received = asyncio.Event()
        self._request_id = utils.shortuuid("fake_stt_")

    @property
    def closed(self) -> bool:
        return self._event_ch.closed or self._task.done()

    async def _run(self) -> None:
        async for item in self._input_ch:
            if isinstance(item, rtc.AudioFrame):
                self.frames += 1
                self.sizes.append(item.samples_per_channel)
                self._received.set()

    async def last_frame_was(self, samples: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Bounded: the last frame this stream received has ``samples`` samples (a test pushes
        a frame of its own length last, so every frame that reached the stream before it has)."""

        async def _wait() -> None:
            while self.sizes[-1:] != [samples]:
                self._received.clear()
                await self._received.wait()

        await bounded(_wait(), timeout, what=f"a frame of {samples} samples at the STT")

    def send(self, type: stt.SpeechEventType, text: str | None = None) -> None:
        alternatives = (
            [stt.SpeechData(language=self._stt.language, text=text, confidence=1.0)]
            if text is not None
            else []
        )
        self._event_ch.send_nowait(
            stt.SpeechEvent(type=type, request_id=self._request_id, alternatives=alternatives)
        )


# -- the session, and a caller --


def speech_session_kwargs(
    *, vad: ScriptedVAD, stt: ScriptedSTT, audio_input: FakeAudioInput, **overrides: Any
) -> dict[str, Any]:
    """``offline_session_kwargs`` for a spoken session: the fakes, and the turn handling that
    makes a turn end as soon as its last event is in (see the module docs). ``turn_handling``
    overrides are merged key by key."""
    turn_handling: dict[str, Any] = {
        "turn_detection": "vad",
        "endpointing": {"min_delay": 0.0, "max_delay": 0.0},
        "interruption": {"mode": "vad", "min_words": 0, "false_interruption_timeout": None},
        "preemptive_generation": {"enabled": False},
    }
    for key, value in (overrides.pop("turn_handling", None) or {}).items():
        if isinstance(value, dict) and isinstance(turn_handling.get(key), dict):
            turn_handling[key] = {**turn_handling[key], **value}
        else:
            turn_handling[key] = value
    # closing, the session pushes silence and waits this long for the STT's final transcript;
    # the scripted STT only transcribes what the test says, so the wait would only run out
    overrides.setdefault("session_close_transcript_timeout", 0.0)
    return offline_session_kwargs(
        vad=vad, stt=stt, audio_input=audio_input, turn_handling=turn_handling, **overrides
    )


class Caller:
    """A caller speaking into a session through :class:`FakeAudioInput`, :class:`ScriptedVAD`
    and :class:`ScriptedSTT`. Each step waits (bounded) for the session to take it in."""

    def __init__(self) -> None:
        self.vad = ScriptedVAD()
        self.stt = ScriptedSTT()
        self.audio = FakeAudioInput()
        self.session: AgentSession[Any] | None = None

    def session_kwargs(self, **overrides: Any) -> dict[str, Any]:
        return speech_session_kwargs(vad=self.vad, stt=self.stt, audio_input=self.audio, **overrides)

    def attach(self, session: AgentSession[Any]) -> None:
        self.session = session

    def _session(self) -> AgentSession[Any]:
        if self.session is None:
            raise AssertionError("Caller.attach(session) first")
        return self.session

    async def _step(self, event: str, predicate: Any, trigger: Any, timeout: float) -> Any:
        waiter = asyncio.ensure_future(wait_for_event(self._session(), event, predicate, timeout=timeout))
        try:
            trigger()
        except BaseException:
            waiter.cancel()
            raise
        return await waiter

    async def start_speaking(self, *, frames: int = 5, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Audio, then the VAD's start of speech; returns once the user state is ``speaking``."""

        def trigger() -> None:
            self.audio.push(frames)
            self.vad.start_of_speech()

        if self._session().user_state == "speaking":
            trigger()
            return
        await self._step("user_state_changed", lambda ev: ev.new_state == "speaking", trigger, timeout)

    async def interim(self, text: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """An interim transcript; returns once the session emitted it."""
        await self._step(
            "user_input_transcribed",
            lambda ev: not ev.is_final and ev.transcript == text,
            lambda: self.stt.interim(text),
            timeout,
        )

    async def stop_speaking(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """The VAD's end of speech; returns once the user state is ``listening``."""
        await self._step(
            "user_state_changed", lambda ev: ev.new_state == "listening", self.vad.end_of_speech, timeout
        )

    async def final(self, text: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """The final transcript; returns once the session emitted it. With the caller silent,
        the session's end of turn for it follows at once (endpointing delay 0)."""
        await self._step(
            "user_input_transcribed",
            lambda ev: ev.is_final and ev.transcript == text,
            lambda: self.stt.final(text),
            timeout,
        )

    async def turn_ended(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until the session's end-of-turn detection for the turn so far has run: the turn
        was committed to the activity (answered, or skipped), or dropped as it had no
        transcript. Call it with the caller silent, after the final transcript."""
        activity = self._session()._activity
        recognition = activity._audio_recognition if activity is not None else None
        task = recognition._end_of_turn_task if recognition is not None else None
        if task is not None:
            # cancelled when new speech starts: the turn goes on, nothing to wait for
            await bounded(
                asyncio.gather(asyncio.shield(task), return_exceptions=True),
                timeout,
                what="the end-of-turn detection",
            )

    async def say(self, text: str, *, interim: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        """A whole turn: start of speech, an interim transcript, end of speech, the final one;
        returns once the session's end of turn for it ran (:meth:`turn_ended`)."""
        await self.start_speaking(timeout=timeout)
        await self.interim(interim if interim is not None else text.split(" ")[0], timeout=timeout)
        await self.stop_speaking(timeout=timeout)
        await self.final(text, timeout=timeout)
        await self.turn_ended(timeout=timeout)
