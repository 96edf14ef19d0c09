"""Audio-side fakes: a silent TTS, an audio sink with controllable playout, a text sink.

* :class:`FakeTTS` synthesises silence whose duration is proportional to the text
  (``seconds_per_char``), either chunked (``streaming=False``; the framework wraps it in its
  sentence ``StreamAdapter``) or as a native stream (``streaming=True``).
* :class:`FakeAudioOutput` is an ``io.AudioOutput`` sink. ``mode="instant"`` finishes each
  segment as soon as it is flushed; ``mode="realtime"`` plays it out on the loop clock
  (``speed`` scales it: 10.0 plays ten times faster), can be paused/resumed and interrupted
  with ``clear_buffer()``, reporting the played position. Both report
  ``playback_started``/``playback_finished`` exactly once per segment, so speech handles
  complete.
* :class:`RecordingTextOutput` records the transcript the session forwards.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Literal

from livekit import rtc
from livekit.agents import tts, utils
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.voice import io

__all__ = ["FakeAudioOutput", "FakeTTS", "PlayedSegment", "RecordingTextOutput"]


def _silence(duration: float, sample_rate: int, num_channels: int) -> bytes:
    samples = max(1, int(round(duration * sample_rate)))
    return b"\x00\x00" * samples * num_channels


def _start(output_emitter: tts.AudioEmitter, fake: FakeTTS, *, stream: bool) -> None:
    """Start a request's emitter on the fake's raw PCM format, chunked or streamed."""
    output_emitter.initialize(
        request_id=utils.shortuuid("fake_tts_"),
        sample_rate=fake.sample_rate,
        num_channels=fake.num_channels,
        mime_type="audio/pcm",
        stream=stream,
    )


class FakeTTS(tts.TTS[Any]):
    """Silent TTS; every synthesised text is appended to :attr:`texts` (one entry per request
    or per streamed segment)."""

    def __init__(
        self,
        *,
        seconds_per_char: float = 0.01,
        streaming: bool = False,
        sample_rate: int = 16000,
        num_channels: int = 1,
    ) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=streaming),
            sample_rate=sample_rate,
            num_channels=num_channels,
        )
        self.seconds_per_char = seconds_per_char
        self.texts: list[str] = []

    @property
    def model(self) -> str:
        return "fake-tts"

    @property
    def provider(self) -> str:
        return "fake"

    def duration_for(self, text: str) -> float:
        return len(text) * self.seconds_per_char

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        return _FakeChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.SynthesizeStream:
        if not self.capabilities.streaming:
            return super().stream(conn_options=conn_options)
        return _FakeSynthesizeStream(tts=self, conn_options=conn_options)


class _FakeChunkedStream(tts.ChunkedStream):
    _tts: FakeTTS

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        fake = self._tts
        _start(output_emitter, fake, stream=False)
        fake.texts.append(self.input_text)
        output_emitter.push(_silence(fake.duration_for(self.input_text), fake.sample_rate, fake.num_channels))
        output_emitter.flush()


class _FakeSynthesizeStream(tts.SynthesizeStream):
    _tts: FakeTTS

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        fake = self._tts
        _start(output_emitter, fake, stream=True)
        segment: list[str] | None = None
        async for data in self._input_ch:
            if isinstance(data, str):
                if segment is None:
                    segment = []
                    output_emitter.start_segment(segment_id=utils.shortuuid("fake_seg_"))
                self._mark_started()
                segment.append(data)
                output_emitter.push(_silence(fake.duration_for(data), fake.sample_rate, fake.num_channels))
            elif segment is not None:  # flush sentinel closes the segment
                fake.texts.append("".join(segment))
                output_emitter.end_segment()
                segment = None
        if segment is not None:
            fake.texts.append("".join(segment))
            output_emitter.end_segment()


@dataclass
class PlayedSegment:
    """One playout segment as the sink reported it."""

    duration: float
    """Audio captured for the segment (seconds)."""
    position: float
    """How much of it was reported played."""
    interrupted: bool


class FakeAudioOutput(io.AudioOutput):
    """Audio sink with instant or loop-clock playout. See module docs."""

    def __init__(
        self,
        *,
        mode: Literal["instant", "realtime"] = "instant",
        speed: float = 1.0,
        sample_rate: int | None = None,
        label: str = "FakeAudioOutput",
    ) -> None:
        super().__init__(
            label=label,
            capabilities=io.AudioOutputCapabilities(pause=True),
            sample_rate=sample_rate,
        )
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.mode = mode
        self.speed = speed
        self.segments: list[PlayedSegment] = []
        self.frames_captured = 0

        self._open = False  # a segment is being captured (not flushed yet)
        self._pending = False  # the current segment was not reported finished yet
        self._seg_duration = 0.0
        self._flushed = False
        self._play_started_at: float | None = None  # loop time the segment began playing
        self._played_before_pause = 0.0
        self._paused = False
        self._timer: asyncio.TimerHandle | None = None

    # -- io.AudioOutput --

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        self.frames_captured += 1
        if not self._open:
            self._open = True
            self._pending = True
            self._flushed = False
            self._seg_duration = 0.0
            self._played_before_pause = 0.0
            self._play_started_at = None if self._paused else self._now()
            self.on_playback_started(created_at=time.time())
        self._seg_duration += frame.duration

    def flush(self) -> None:
        super().flush()
        if not self._open:
            return
        self._open = False
        if not self._pending:
            return  # already reported (cleared while capturing)
        self._flushed = True
        if self.mode == "instant":
            self._finish(self._seg_duration, interrupted=False)
        else:
            self._schedule_finish()

    def clear_buffer(self) -> None:
        if not self._pending:
            return
        position = self._seg_duration if self.mode == "instant" else self._played()
        self._finish(min(position, self._seg_duration), interrupted=True)

    def pause(self) -> None:
        super().pause()
        if self._paused:
            return
        self._paused = True
        if self._play_started_at is not None:
            self._played_before_pause = self._played()
            self._play_started_at = None
        self._cancel_timer()

    def resume(self) -> None:
        super().resume()
        if not self._paused:
            return
        self._paused = False
        if self._pending:
            self._play_started_at = self._now()
            if self._flushed and self.mode == "realtime":
                self._schedule_finish()

    # -- helpers --

    @property
    def paused(self) -> bool:
        """The session paused the playout (``pause()``) and did not resume it."""
        return self._paused

    @property
    def playing(self) -> bool:
        """A segment was captured and is not reported finished yet."""
        return self._pending

    async def wait_for_segments(self, n: int, timeout: float = 5.0) -> list[PlayedSegment]:
        """Bounded wait until ``n`` segments were reported finished."""
        from .sync import wait_for_event

        while len(self.segments) < n:
            await wait_for_event(self, "playback_finished", timeout=timeout)
        return self.segments

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _played(self) -> float:
        played = self._played_before_pause
        if self._play_started_at is not None:
            played += (self._now() - self._play_started_at) * self.speed
        return played

    def _schedule_finish(self) -> None:
        self._cancel_timer()
        if self._paused:
            return
        remaining = max(0.0, (self._seg_duration - self._played()) / self.speed)
        self._timer = asyncio.get_running_loop().call_later(
            remaining, self._finish, self._seg_duration, False
        )

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _finish(self, position: float, interrupted: bool) -> None:
        self._cancel_timer()
        if not self._pending:
            return
        self._pending = False
        self._play_started_at = None
        self.segments.append(
            PlayedSegment(duration=self._seg_duration, position=position, interrupted=interrupted)
        )
        self.on_playback_finished(playback_position=position, interrupted=interrupted)


class RecordingTextOutput(io.TextOutput):
    """Transcription sink recording each flushed segment in :attr:`segments`."""

    def __init__(self, *, label: str = "RecordingTextOutput") -> None:
        super().__init__(label=label, next_in_chain=None)
        self.segments: list[str] = []
        self._current: list[str] = []

    @property
    def current(self) -> str:
        return "".join(self._current)

    async def capture_text(self, text: str) -> None:
        self._current.append(text)

    def flush(self) -> None:
        if self._current:
            self.segments.append("".join(self._current))
            self._current = []
