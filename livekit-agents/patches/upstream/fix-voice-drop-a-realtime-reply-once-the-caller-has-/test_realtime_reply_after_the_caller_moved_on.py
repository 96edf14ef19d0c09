"""The caller starts their next turn before the agent taking over asked the realtime model for
its answer to a turn handed over: that answer is not asked for any more, the next turn's answers
the caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool, utils
from livekit.agents.llm import (
    FunctionCall,
    GenerationCreatedEvent,
    InputSpeechStartedEvent,
    InputSpeechStoppedEvent,
    InputTranscriptionCompleted,
    MessageGeneration,
)
from livekit.agents.voice.agent_activity import ActivityClosedError

from .fake_realtime import FakeRealtimeModel, FakeRealtimeSession, fake_capabilities

pytestmark = pytest.mark.unit

DESK = "You are the front desk."
BILLING = "You are the billing desk."
TO_BILLING = "Put me through to billing."
FIRST = "I was charged twice."
SECOND = "Actually, it's about a refund."


class ServerTurnSession(FakeRealtimeSession):
    """A realtime session with server-side turn detection; it records each reply it is asked
    for, with the instructions and the last user message it had then."""

    def __init__(self, model: ServerTurnModel) -> None:
        super().__init__(model)
        self._turn_model = model

    def generate_reply(self, **kwargs: Any) -> asyncio.Future[GenerationCreatedEvent]:
        fut = super().generate_reply(**kwargs)
        self._turn_model.requests.append((self.updated_instructions, _last_user_text(self)))
        fut.set_result(_generation(text="ok", user_initiated=True))
        return fut

    def start_turn(self) -> None:
        """The server hears the caller start speaking."""
        self.emit("input_speech_started", InputSpeechStartedEvent())

    def end_turn(
        self, transcript: str, *, calls: list[FunctionCall] | None = None, reply: str | None = "ok"
    ) -> None:
        """The caller stops speaking: the server transcribes the turn and replies on its own."""
        item_id = utils.shortuuid("user_")
        self.emit("input_speech_stopped", InputSpeechStoppedEvent(user_transcription_enabled=True))
        self._chat_ctx = self.chat_ctx.copy()
        self._chat_ctx.add_message(role="user", content=transcript, id=item_id)
        self.emit(
            "input_audio_transcription_completed",
            InputTranscriptionCompleted(item_id=item_id, transcript=transcript, is_final=True),
        )
        self.emit(
            "generation_created",
            _generation(text=None if calls else reply, calls=calls, user_initiated=False),
        )


class ServerTurnModel(FakeRealtimeModel):
    def __init__(self, *, auto_tool_reply_generation: bool = False) -> None:
        super().__init__(
            capabilities=fake_capabilities(auto_tool_reply_generation=auto_tool_reply_generation)
        )
        self.requests: list[tuple[str | None, str | None]] = []

    def session(self, *, turn_detection_disabled: bool = False) -> FakeRealtimeSession:
        sess = ServerTurnSession(self)
        self.created_sessions.append(sess)
        return sess


def _last_user_text(rt_session: FakeRealtimeSession) -> str | None:
    users = [i for i in rt_session.chat_ctx.items if i.type == "message" and i.role == "user"]
    return users[-1].text_content if users else None


def _generation(
    *, text: str | None, calls: list[FunctionCall] | None = None, user_initiated: bool
) -> GenerationCreatedEvent:
    message_ch = utils.aio.Chan[MessageGeneration]()
    if text is not None:
        text_ch = utils.aio.Chan[str]()
        text_ch.send_nowait(text)
        text_ch.close()
        audio_ch = utils.aio.Chan[rtc.AudioFrame]()
        audio_ch.close()
        modalities: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        modalities.set_result(["text"])
        message_ch.send_nowait(
            MessageGeneration(
                message_id=utils.shortuuid("msg_"),
                text_stream=text_ch,
                audio_stream=audio_ch,
                modalities=modalities,
            )
        )
    message_ch.close()
    function_ch = utils.aio.Chan[FunctionCall]()
    for call in calls or []:
        function_ch.send_nowait(call)
    function_ch.close()
    return GenerationCreatedEvent(
        message_stream=message_ch,
        function_stream=function_ch,
        user_initiated=user_initiated,
        response_id=utils.shortuuid("resp_"),
    )


async def _settled_on(session: AgentSession, agent: Agent) -> None:
    """The agent's activity is the session's, and idle."""

    async def settle() -> None:
        while True:
            try:
                activity = await session.wait_for_idle()
            except ActivityClosedError:
                activity = None  # a handoff is closing the activity: look again
            if activity is not None and activity.agent is agent:
                return
            await asyncio.sleep(0)

    await asyncio.wait_for(settle(), timeout=5)


def _user_messages(session: AgentSession, text: str) -> int:
    return sum(
        1
        for i in session.history.items
        if i.type == "message" and i.role == "user" and i.text_content == text
    )


class Billing(Agent):
    def __init__(self, model: ServerTurnModel) -> None:
        super().__init__(instructions=BILLING, llm=model)
        self.entered = asyncio.Event()

    async def on_enter(self) -> None:
        # the caller starts speaking again as billing comes in, before it takes the turn
        # handed over to it
        rt_session = self.realtime_llm_session
        assert isinstance(rt_session, ServerTurnSession)
        rt_session.start_turn()
        self.entered.set()


class Desk(Agent):
    def __init__(self, billing_model: ServerTurnModel) -> None:
        super().__init__(instructions=DESK)
        self.exiting = asyncio.Event()
        self.exit_gate = asyncio.Event()
        self.billing_model = billing_model
        self.billing: Billing | None = None

    async def on_exit(self) -> None:
        self.exiting.set()
        await self.exit_gate.wait()

    @function_tool
    async def to_billing(self) -> Agent:
        """Put the caller through to the billing desk."""
        self.billing = Billing(self.billing_model)
        return self.billing


async def test_the_callers_next_turn_supersedes_the_answer_to_a_turn_handed_over() -> None:
    desk_model, billing_model = ServerTurnModel(), ServerTurnModel()
    desk = Desk(billing_model)
    async with AgentSession(llm=desk_model) as session:
        await session.start(desk)
        rt_session = desk_model.active_session
        assert isinstance(rt_session, ServerTurnSession)

        rt_session.start_turn()
        rt_session.end_turn(
            TO_BILLING, calls=[FunctionCall(call_id="call_1", name="to_billing", arguments="{}")]
        )
        await asyncio.wait_for(desk.exiting.wait(), timeout=5)
        try:
            # a whole turn while the desk leaves: the billing desk is to answer it
            rt_session.start_turn()
            rt_session.end_turn(FIRST)
        finally:
            desk.exit_gate.set()

        billing = desk.billing
        assert billing is not None
        await asyncio.wait_for(billing.entered.wait(), timeout=5)
        billing_session = billing_model.active_session
        assert isinstance(billing_session, ServerTurnSession)
        assert billing_session is not rt_session
        activity = billing._activity
        assert activity is not None
        if (turn_task := activity._user_turn_completed_atask) is not None:
            # billing took the turn handed over
            await asyncio.wait_for(asyncio.shield(turn_task), timeout=5)

        # the caller finishes their next turn: the server answers it
        billing_session.end_turn(SECOND, reply="billing answers the second turn")
        await _settled_on(session, billing)

        assert _user_messages(session, FIRST) == 1
        assert _user_messages(session, SECOND) == 1
        # the model answering the next turn knows the turn handed over
        users = [
            i.text_content
            for i in billing_session.chat_ctx.items
            if i.type == "message" and i.role == "user"
        ]
        assert users[-2:] == [FIRST, SECOND]
        # and is not asked for an answer to it after the caller went on (it would answer the
        # caller's next turn a second time)
        assert billing_model.requests == []
