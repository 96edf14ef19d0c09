"""Scripted fakes and helpers to drive a real ``AgentSession`` deterministically, offline.

Import from here, e.g.::

    from tests.fakes import Gate, Reply, ScriptedLLM, bounded, running_session, tool_call

    fake = ScriptedLLM([Reply(tool_calls=[tool_call("lookup")]), "It is 42."])
    async with running_session(MyAgent(), llm=fake) as session:   # or the make_session fixture
        result = await bounded(session.run(user_input="look it up"))
    assert fake.calls[1].tool_choice is None

Modules: ``script`` (Reply, tool_call, script/exhaustion rules), ``llm`` (ScriptedLLM),
``realtime`` (ScriptedRealtimeModel/Session, scripted_model, late_calls), ``audio`` (FakeTTS, FakeAudioOutput,
RecordingTextOutput), ``session`` (offline AgentSession setup), ``sync`` (bounded waits, Gate),
``speech`` (Caller, ScriptedVAD, ScriptedSTT, FakeAudioInput: spoken turns through the session's
audio input), ``agents`` (Journal, and agents and tasks that journal their on_enter/on_exit), ``history``
(spoken, unanswered_calls: what a session's history shows), ``desks`` (the front desk that puts
the caller through to billing, its script and the slow toolsets the handoff tests share: import
it by module, ``from tests.fakes.desks import Desk, DeskJournal, answer``; so are ``orders``, the
async order lookup that outlives a handoff, and ``nova_sonic``, Nova Sonic sessions on the
``bedrock_stream`` fake), ``hygiene`` (the per-test checks wired up in ``tests/conftest.py``).
"""

from .agents import Journal, Journaling, JournalingAgent, JournalingTask
from .audio import FakeAudioOutput, FakeTTS, PlayedSegment, RecordingTextOutput
from .history import spoken, unanswered_calls
from .hygiene import HYGIENE_KEY, ErrorLogCapture, SessionTracker
from .llm import LLMCall, ScriptedLLM, current_agent, snapshot_chat_ctx
from .realtime import (
    GEMINI_CAPABILITIES,
    MODEL_KINDS,
    FirstCloseHookModel,
    RTGeneration,
    RTJournalEntry,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    default_realtime_capabilities,
    late_calls,
    scripted_model,
)
from .script import Delay, Reply, ScriptExhaustedError, ScriptItem, tool_call
from .session import MakeSession, offline_session_kwargs, running_session, start_session
from .speech import Caller, FakeAudioInput, ScriptedSTT, ScriptedVAD, speech_session_kwargs
from .sync import DEFAULT_TIMEOUT, BoundedWaitTimeout, Gate, bounded, wait_for_event

__all__ = [
    "DEFAULT_TIMEOUT",
    "GEMINI_CAPABILITIES",
    "HYGIENE_KEY",
    "MODEL_KINDS",
    "BoundedWaitTimeout",
    "Caller",
    "Delay",
    "ErrorLogCapture",
    "FakeAudioInput",
    "FakeAudioOutput",
    "FakeTTS",
    "FirstCloseHookModel",
    "Gate",
    "Journal",
    "Journaling",
    "JournalingAgent",
    "JournalingTask",
    "LLMCall",
    "MakeSession",
    "PlayedSegment",
    "RTGeneration",
    "RTJournalEntry",
    "RecordingTextOutput",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedSTT",
    "ScriptItem",
    "ScriptedLLM",
    "ScriptedRealtimeModel",
    "ScriptedRealtimeSession",
    "ScriptedVAD",
    "SessionTracker",
    "bounded",
    "current_agent",
    "default_realtime_capabilities",
    "late_calls",
    "offline_session_kwargs",
    "running_session",
    "scripted_model",
    "snapshot_chat_ctx",
    "speech_session_kwargs",
    "spoken",
    "start_session",
    "tool_call",
    "unanswered_calls",
    "wait_for_event",
]
