"""Build the agents, tools and model of a :class:`Scenario`, drive a real ``AgentSession``
through it, and check the invariants. ``run_scenario`` is one whole scenario on the running
loop; the runner gives each scenario an event loop of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from livekit.agents import Agent, AgentSession, AgentTask, RunContext, ToolError, function_tool, llm
from livekit.agents.llm.async_toolset import AsyncToolset
from livekit.agents.voice import agent_activity

from tests.fakes import (
    FakeAudioOutput,
    FakeTTS,
    LLMCall,
    Reply,
    RTGeneration,
    ScriptedLLM,
    ScriptedRealtimeModel,
    ScriptedRealtimeSession,
    current_agent,
    offline_session_kwargs,
    tool_call,
)

from . import invariants as inv
from .hygiene import ScenarioHygiene
from .invariants import Probe, Violation
from .scenario import Scenario, ToolStep

ALLOWED_ERRORS: dict[str, str] = {
    # generation.py / tool_executor.py log a tool's own (non-ToolError) exception with
    # logger.exception; only scenarios with a tool returning "exception" raise StressBoom.
    "exception": r"exception occurred while executing tool.*StressBoom",
    # agent_activity._inline_task_slot raises this into the tool awaiting an inline AgentTask
    # when that speech is interrupted (by the user, or by aclose()), and the tool's exception
    # is then logged as above; only scenarios with a "task" step and a barge-in / close.
    "task+barge_in": r"exception occurred while executing tool.*the speech that awaited the inline task is interrupted",
    "task+close": r"exception occurred while executing tool.*the speech that awaited the inline task is interrupted",
}
"""ERROR records a scenario may legitimately cause, keyed by what in the scenario causes them."""


class StressBoom(Exception):
    """What a tool with ``returns="exception"`` raises."""


async def ticks(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def user_text(turn: int) -> str:
    return f"turn {turn}"


class StressAgent(Agent):
    def __init__(
        self, world: World, agent_id: str, tools: list[Any], chat_ctx: llm.ChatContext | None = None
    ) -> None:
        super().__init__(instructions=f"You are {agent_id}.", id=agent_id, tools=tools, chat_ctx=chat_ctx)
        self.world = world

    async def on_enter(self) -> None:
        self.world.probe.agent_event(self, "enter")
        if self.world.sc.enter_reply:
            self.session.generate_reply()
        self.world.probe.agent_event(self, "entered")

    async def on_exit(self) -> None:
        self.world.probe.agent_event(self, "exit")
        try:
            await ticks(1)
        except asyncio.CancelledError:
            self.world.probe.agent_event(self, "exit_cancelled")
            raise
        self.world.probe.agent_event(self, "exited")


class StressTask(AgentTask[str]):
    """An inline task that completes itself ``n`` ticks into its on_enter."""

    def __init__(self, world: World, task_id: str, n: int) -> None:
        super().__init__(instructions=f"You are {task_id}.")
        self._id = task_id  # AgentTask takes no id=; the probe tells instances apart by id
        self.world = world
        self.n = n

    async def on_enter(self) -> None:
        self.world.probe.agent_event(self, "enter")
        await ticks(self.n)
        if not self.done():
            self.complete(f"{self.id} done")
        self.world.probe.agent_event(self, "entered")

    async def on_exit(self) -> None:
        self.world.probe.agent_event(self, "exit")
        self.world.probe.agent_event(self, "exited")


class World:
    """Everything a scenario is made of: the plan of tool calls, tools, agents and model."""

    def __init__(self, sc: Scenario, probe: Probe) -> None:
        self.sc = sc
        self.probe = probe
        self.plan: dict[str, ToolStep] = {
            f"t{i}s{k}": step for i, turn in enumerate(sc.turns) for k, step in enumerate(turn.tools)
        }
        self.answered: set[int] = set()
        self.n_agents = 0
        self.tools = [self._make_tool(k) for k in range(len(sc.scopes))]
        self.session_tools: list[llm.Toolset] = []
        if scoped := self._scoped("session_toolset"):
            self.session_tools.append(AsyncToolset(id="session_async", tools=scoped))
        self.model: llm.LLM[Any] | llm.RealtimeModel
        if sc.mode == "pipeline":
            self.model = _ProbedLLM(probe, fallback=self._answer_llm)
        else:
            self.model = _ProbedRealtimeModel(
                probe,
                fallback=self._answer_rt,
                auto_tool_reply_generation=sc.auto_tool_reply,
                reuse=sc.reuse,
            )

    def _scoped(self, scope: str) -> list[llm.FunctionTool]:
        return [t for t, s in zip(self.tools, self.sc.scopes, strict=True) if s == scope]

    def new_agent(self, chat_ctx: llm.ChatContext | None = None) -> StressAgent:
        """A new agent; with ``chat_ctx`` (the leaving agent's) it carries the conversation on."""
        agent_id = f"agent_{self.n_agents}"
        self.n_agents += 1
        tools: list[Any] = list(self._scoped("agent"))
        if scoped := self._scoped("agent_toolset"):
            tools.append(AsyncToolset(id=f"{agent_id}_async", tools=scoped))
        if chat_ctx is not None:
            self.probe.carries_on.add(agent_id)
        return StressAgent(self, agent_id, tools, chat_ctx=chat_ctx)

    # -- the model: a tool batch for each user turn, text for anything else --

    def _answer(self, chat_ctx: llm.ChatContext, asker: str) -> Reply:
        last = chat_ctx.items[-1] if chat_ctx.items else None
        if last is not None and last.type == "message" and last.role == "user":
            text = last.text_content or ""
            turn = int(text.split()[1]) if text.startswith("turn ") and text.split()[1].isdigit() else -1
            if 0 <= turn < len(self.sc.turns) and turn not in self.answered:
                self.answered.add(turn)
                batch = self.sc.turns[turn].tools
                if batch:
                    call_ids = [f"c{turn}_{k}" for k in range(len(batch))]
                    self.probe.issued.update(dict.fromkeys(call_ids, asker))
                    return Reply(
                        tool_calls=[
                            tool_call(f"tool_{k}", {"step": f"t{turn}s{k}"}, call_id=call_id)
                            for k, call_id in enumerate(call_ids)
                        ]
                    )
        return Reply(text=f"{asker} says ok")

    def _answer_llm(self, call: LLMCall) -> Reply:
        return self._answer(call.chat_ctx, getattr(call.agent, "id", "someone"))

    def _answer_rt(self, gen: RTGeneration) -> Reply:
        return self._answer(gen.chat_ctx, getattr(gen.agent, "id", "model"))

    # -- the tools --

    def _make_tool(self, k: int) -> llm.FunctionTool:
        async def tool(ctx: RunContext, step: str) -> Any:
            return await self._run_tool(ctx, step)

        return function_tool(tool, name=f"tool_{k}", description="Run one scripted step.")

    async def _run_tool(self, ctx: RunContext, key: str) -> Any:
        step = self.plan[key]
        self.probe.tool_started()
        try:
            if step.update:
                await ctx.update(f"working on {key}")
            await ticks(step.ticks)
            if step.returns == "text":
                return f"result of {key}"
            if step.returns in ("agent", "agent_text"):
                call_id = ctx.function_call.call_id
                # every other turn's agents carry the conversation on, the others start afresh
                carry = int(key[1:].split("s")[0]) % 2 == 0
                issuer = self.probe.agents.get(self.probe.issuer(call_id) or "")
                agent = self.new_agent(issuer.chat_ctx if carry and issuer is not None else None)
                self.probe.handoff_calls[f"{call_id}_final" if step.update else call_id] = agent.id
                return agent if step.returns == "agent" else (agent, f"{inv.HANDOFF_MESSAGE} {key}")
            if step.returns == "tool_error":
                raise ToolError(f"{key} refused")
            if step.returns == "exception":
                raise StressBoom(key)
            if step.returns == "task":
                return await StressTask(self, f"task_{key}", step.ticks)
            return None
        finally:
            self.probe.tool_finished()


class _ProbedLLM(ScriptedLLM):
    def __init__(self, probe: Probe, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.probe = probe

    def chat(self, **kwargs: Any) -> llm.LLMStream:
        self.probe.generation(current_agent(), "llm chat", current_speech(), kwargs["chat_ctx"])
        return super().chat(**kwargs)


class _ProbedRealtimeModel(ScriptedRealtimeModel):
    def __init__(self, probe: Probe, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.probe = probe

    def session(self, *, turn_detection_disabled: bool = False) -> ScriptedRealtimeSession:
        sess = super().session(turn_detection_disabled=turn_detection_disabled)
        generate_reply = sess.generate_reply
        probe = self.probe

        def probed(**kwargs: Any) -> asyncio.Future[llm.GenerationCreatedEvent]:
            what = f"realtime generate_reply on session #{sess.index}"
            probe.generation(current_agent(), what, current_speech(), sess.chat_ctx)
            return generate_reply(**kwargs)

        sess.generate_reply = probed  # type: ignore[method-assign]
        return sess


def current_speech() -> Any | None:
    """Best effort, like ``tests.fakes.current_agent``: the speech handle of the current task."""
    var = getattr(agent_activity, "_SpeechHandleContextVar", None)
    return var.get(None) if var is not None else None


async def _within(aw: Any, timeout: float) -> tuple[bool, BaseException | None]:
    """Await without cancelling on timeout: (finished, exception raised)."""
    fut = asyncio.ensure_future(aw)
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved, even if late
    done, _ = await asyncio.wait({fut}, timeout=timeout)
    if not done:
        return False, None
    return True, None if fut.cancelled() else fut.exception()


async def _idle(session: AgentSession[Any]) -> None:
    """``wait_for_idle()``, retried while it raises because a handoff is closing the activity."""
    while True:
        try:
            await session.wait_for_idle()
            return
        except Exception:
            await asyncio.sleep(0.001)


async def _act(session: AgentSession[Any], world: World, turn: int) -> asyncio.Future[Any] | None:
    """Do the turn's action; for ``close`` return the closing future."""
    spec = world.sc.turns[turn]
    await ticks(spec.action_ticks)
    if spec.action == "barge_in":
        try:
            session.interrupt()
            session.generate_reply(user_input=f"{user_text(turn)} barge-in")
        except RuntimeError:
            pass  # the speech in progress is not interruptible / the session is closing
    elif spec.action == "update_agent":
        session.update_agent(world.new_agent())
    elif spec.action == "close":
        return asyncio.ensure_future(session.aclose())
    return None


async def _settle(session: AgentSession[Any], probe: Probe) -> bool:
    """True once tools are done, the session is idle and three probes in a row see no change."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + inv.SETTLE_BOUND
    last: tuple[Any, ...] = ()
    stable = 0
    while stable < 3:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await _within(probe.tools_idle.wait(), remaining)
        await _within(_idle(session), max(0.0, deadline - loop.time()))
        await ticks(5)
        await asyncio.sleep(0.002)
        sig = (*probe.signature(), len(session.history.items), session.current_agent.id)
        stable = stable + 1 if sig == last else 0
        last = sig
    return True


def allowed_errors(sc: Any) -> list[str]:
    """The ``ALLOWED_ERRORS`` patterns the returns and actions of ``sc`` (a :class:`Scenario`, or
    one of another mode with the same ``turns``) can cause."""
    used = {step.returns for turn in sc.turns for step in turn.tools} | {turn.action for turn in sc.turns}
    return [pattern for cause, pattern in ALLOWED_ERRORS.items() if set(cause.split("+")) <= used]


async def run_turns(
    session: AgentSession[Any],
    sc: Any,
    act: Callable[[int], Awaitable[asyncio.Future[Any] | None]],
    out: list[Violation],
) -> asyncio.Future[Any] | None:
    """The user turns of ``sc``: each a ``session.run()``, with ``act(i)`` (the turn's action)
    alongside; appends to ``out`` what a run did wrong. Stops at the turn whose action closed the
    session and returns that close, or at a run that never returned (then ``None``)."""
    closing: asyncio.Future[Any] | None = None
    for i, turn in enumerate(sc.turns):
        if i:  # the next user turn comes once the previous one is over, as a client would
            await _within(_idle(session), inv.RUN_BOUND)
        try:
            run = session.run(user_input=user_text(i))
        except RuntimeError as e:
            out.append(Violation("run_returns", f"turn {i}: run() raised {e!r}"))
            break
        action = asyncio.ensure_future(act(i))
        finished, exc = await _within(run, inv.RUN_BOUND)
        if not finished:
            out.append(Violation("run_returns", f"turn {i}: run() still pending after {inv.RUN_BOUND}s"))
        elif exc is not None and not (turn.action == "close" and "session closed" in str(exc)):
            out.append(Violation("run_returns", f"turn {i}: run() raised {exc!r}"))
        await _within(action, inv.RUN_BOUND)
        closing = action.result() if action.done() and not action.cancelled() else None
        if closing is not None or not finished:
            break
    return closing


async def close_and_check(
    session: AgentSession[Any],
    probe: Probe,
    closing: asyncio.Future[Any] | None,
    out: list[Violation],
    *,
    before_close: Callable[[], None] | None = None,
) -> None:
    """Unless a turn's action closed the session already (``closing``): let it settle, check
    it, call ``before_close`` and close it. Then wait for the close and check the invariants of
    the whole scenario, appending to ``out``."""
    if closing is None:
        if not await _settle(session, probe):
            out.append(Violation("settles", f"tools running: {probe.tools_running}"))
        out += inv.check_active(probe, session, closed=False)
        if before_close is not None:
            before_close()
        closing = asyncio.ensure_future(session.aclose())
    finished, exc = await _within(closing, inv.CLOSE_BOUND)
    if not finished or exc is not None:
        out.append(Violation("aclose_returns", f"finished={finished} raised={exc!r}"))
    out += inv.check_active(probe, session, closed=True)
    out += inv.check_enter_exit(probe)
    out += inv.check_late_generations(probe)
    out += inv.check_history(session)


async def run_scenario(sc: Scenario) -> list[Violation]:
    probe = Probe()
    hygiene = ScenarioHygiene(allowed_errors(sc))
    hygiene.install()
    out: list[Violation] = []
    try:
        world = World(sc, probe)
        kwargs: dict[str, Any] = {"llm": world.model, "tools": world.session_tools}
        if sc.audio:
            kwargs["tts"] = FakeTTS()
        session: AgentSession[Any] = AgentSession(**offline_session_kwargs(**kwargs))
        if sc.audio:
            session.output.audio = FakeAudioOutput(mode="realtime", speed=20.0)
        session.on("speech_created", lambda ev: probe.speech_created(ev.speech_handle.id))
        await session.start(world.new_agent(), record=False)

        closing = await run_turns(session, sc, lambda i: _act(session, world, i), out)
        await close_and_check(session, probe, closing, out)
    finally:
        await hygiene.close()
    out += hygiene.violations()
    return out
