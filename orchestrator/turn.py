"""The turn loop (DESIGN §5): one inbound message → rounds of model calls and tools → one reply.

Theory of operation
-------------------
Per inbound message: load history → rounds. Each round streams the provider chain to ``Final``
(:mod:`orchestrator.rounds`), forwarding visible text through the reply's outbound policy into
the delivery driver. ``ToolCall``s are collected; with none, the answer is done. Otherwise the
turn's narration is flushed (``end_round`` + ``RoundEnded``), each tool shows its status, runs
(approval first where configured), its result is appended, and a fresh round starts. After
``max_tool_rounds`` rounds with tools, one last call without tools asks for a summary.

``<think>…</think>`` in content is reasoning (:class:`orchestrator.think.ThinkFilter`). Tool
arguments are never redacted; tool results go to the model unredacted and reach the chat only as
status lines through the policy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from channels.base import Channel, InboundMessage
from config.models import AgentConfig
from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import (
    AnswerEnded,
    AnswerInterrupted,
    AnswerRefused,
    Restarted,
    RoundEnded,
    TextEmitted,
    ToolFinished,
    ToolStarted,
)
from orchestrator.delivery.hooks import PiecePolicy
from orchestrator.rounds import RoundFailed, RoundResult, RoundRunner
from orchestrator.store import RoundRecord, Store
from orchestrator.think import ThinkFilter
from orchestrator.tools import ToolRegistry, tool_error
from providers.base import ChatMessage, ChatRequest
from providers.events import (
    PreExecutedToolCall,
    PreExecutedToolResult,
    StreamEvent,
    TextDelta,
    ToolCall,
)

__all__ = ["ReplyPolicyFactory", "TurnOutcome", "TurnRunner"]

log = logging.getLogger(__name__)

SUMMARY_REQUEST = (
    "(No more tool calls are available for this request. Answer now with what you have found, "
    "and say briefly what is still open.)"
)
SHUTDOWN_CAUSE = "the bot is shutting down"
NO_ANSWER_CAUSE = "the model sent no answer"
FINISH_CAUSES = {
    "length": "the model stopped before finishing",
    "content_filter": "the model's content filter stopped it",
}


class ReplyPolicyLike(PiecePolicy, Protocol):
    refusal: str | None

    def begin_round(self) -> None: ...
    def restart(self) -> None: ...
    def feed(self, text: str) -> str: ...
    def end_round(self) -> str: ...
    def finish(self) -> str: ...


class ReplyPolicyFactory(Protocol):
    def new_reply(self, channel: str, chat_id: str) -> ReplyPolicyLike: ...


@dataclass
class TurnOutcome:
    """How a turn ended: ``ok``, ``interrupted`` or ``refused``; the rounds it ran."""

    outcome: str = "ok"
    cause: str | None = None
    rounds: int = 0
    tool_calls: list[tuple[str, str]] = field(default_factory=list)


class _RoundSink:
    """Routes one round's events: visible text through the window to delivery. Reasoning
    (``StreamChunk.reasoning`` and ``<think>`` content) never reaches a chat: no channel shows
    it yet (``show_reasoning`` is accepted by the config and has no effect)."""

    def __init__(self, policy: ReplyPolicyLike, driver: DeliveryDriver) -> None:
        self._policy = policy
        self._driver = driver
        self._think = ThinkFilter()
        self.visible: list[str] = []

    def _forward(self, visible: str) -> None:
        if not visible:
            return
        self.visible.append(visible)
        emitted = self._policy.feed(visible)
        if emitted:
            self._driver.feed(TextEmitted(emitted))

    def event(self, event: StreamEvent) -> None:
        match event:
            case TextDelta(chunk):
                if chunk.delta:
                    self._forward(self._think.feed(chunk.delta)[0])
            case PreExecutedToolCall(name=name):
                self._driver.feed(ToolStarted(self._policy.redact_line(f"⏳ {name}…")))
            case PreExecutedToolResult():
                self._driver.feed(ToolFinished())
            case _:
                pass

    def end(self) -> str:
        self._forward(self._think.flush()[0])
        return "".join(self.visible)

    def restart(self) -> None:
        self._think = ThinkFilter()
        self.visible.clear()
        self._policy.restart()
        self._driver.feed(Restarted())


class TurnRunner:
    """Runs turns for one agent.

    Args:
        agent: the ``agent`` config section.
        rounds: the round runner over ``agent.providers``.
        tools: the tools offered to the model.
        store: history and round records.
        policies: makes one outbound policy per reply.
        on_round: called with each round's record after it is stored (metrics).
    """

    def __init__(
        self,
        *,
        agent: AgentConfig,
        rounds: RoundRunner,
        tools: ToolRegistry,
        store: Store,
        policies: ReplyPolicyFactory,
        on_round: Callable[[RoundRecord], None] | None = None,
    ) -> None:
        self._agent = agent
        self._rounds = rounds
        self._tools = tools
        self._store = store
        self._policies = policies
        self._on_round = on_round
        self._active: set[anyio.CancelScope] = set()

    def cancel_all(self) -> None:
        """Stop every running turn's model work; each still delivers its interrupted marker."""
        for scope in self._active:
            scope.cancel()

    async def run(self, channel: Channel, inbound: InboundMessage) -> TurnOutcome:
        """Answer ``inbound`` in its chat; returns when the reply is fully delivered.

        :meth:`cancel_all` cuts the model work short: the reply then ends with the interrupted
        marker. Cancelling the caller abandons delivery too."""
        chat_id = inbound.chat_id
        history = self._store.history(channel.name, chat_id)
        user = ChatMessage("user", inbound.text)
        new_messages: list[ChatMessage] = [user]
        policy = self._policies.new_reply(channel.name, chat_id)
        driver = DeliveryDriver(channel, chat_id, policy, reply_to=inbound.message_id)
        outcome = TurnOutcome()
        async with anyio.create_task_group() as tg:
            tg.start_soon(driver.run)
            scope = anyio.CancelScope()
            self._active.add(scope)
            try:
                with scope:
                    await self._rounds_loop(
                        channel, inbound, history, new_messages, policy, driver, outcome
                    )
                if scope.cancelled_caught:
                    self._interrupt(driver, policy, outcome, SHUTDOWN_CAUSE)
            except Exception:
                log.exception("turn failed in %s:%s", channel.name, chat_id)
                self._interrupt(driver, policy, outcome, "the bot failed")
            finally:
                self._active.discard(scope)
                self._store.append(channel.name, chat_id, new_messages)
        return outcome

    def _interrupt(
        self, driver: DeliveryDriver, policy: ReplyPolicyLike, outcome: TurnOutcome, cause: str
    ) -> None:
        tail = policy.finish()
        if tail:
            driver.feed(TextEmitted(tail))
        driver.feed(AnswerInterrupted(cause))
        outcome.outcome, outcome.cause = "interrupted", cause

    async def _rounds_loop(
        self,
        channel: Channel,
        inbound: InboundMessage,
        history: list[ChatMessage],
        new_messages: list[ChatMessage],
        policy: ReplyPolicyLike,
        driver: DeliveryDriver,
        outcome: TurnOutcome,
    ) -> None:
        system = ChatMessage("system", self._agent.system_prompt)
        max_rounds = self._agent.max_tool_rounds
        said = False  # some visible text in any round of this reply
        for index in range(max_rounds + 1):
            offer_tools = index < max_rounds and bool(self._tools.specs)
            extra = (
                [] if index < max_rounds or index == 0 else [ChatMessage("user", SUMMARY_REQUEST)]
            )
            request = ChatRequest(
                messages=(system, *history, *new_messages, *extra),
                tools=self._tools.specs if offer_tools else (),
            )
            policy.begin_round()
            sink = _RoundSink(policy, driver)
            writes_before = driver.writes_sent
            outcome.rounds += 1
            try:
                result = await self._rounds.run(request, sink)
            except RoundFailed as failed:
                log.warning(
                    "answer interrupted in %s:%s: %s (%s)",
                    channel.name,
                    inbound.chat_id,
                    failed.cause,
                    failed.error,
                )
                text = sink.end()
                self._interrupt(driver, policy, outcome, failed.cause)
                if text:
                    new_messages.append(ChatMessage("assistant", text))
                self._record(channel, inbound, None, failed.attempts, driver, writes_before)
                return
            text = sink.end()
            said = said or bool(text.strip())
            response = result.response
            calls = response.tool_calls if offer_tools else ()
            self._record(channel, inbound, result, result.attempts, driver, writes_before)
            if calls:
                tail = policy.end_round()
                if tail:
                    driver.feed(TextEmitted(tail))
                if policy.refusal:
                    driver.feed(AnswerRefused(policy.refusal))
                    outcome.outcome = "refused"
                    return
                driver.feed(RoundEnded())
                new_messages.append(
                    ChatMessage(
                        "assistant",
                        text,
                        tool_calls=calls,
                        provider_items=response.provider_items,
                    )
                )
                for call in calls:
                    new_messages.append(
                        await self._run_tool(channel, inbound, call, policy, driver)
                    )
                    outcome.tool_calls.append((call.name, call.arguments))
                continue
            tail = policy.finish()
            if tail:
                driver.feed(TextEmitted(tail))
            new_messages.append(
                ChatMessage("assistant", text, provider_items=response.provider_items)
            )
            if policy.refusal:
                driver.feed(AnswerRefused(policy.refusal))
                outcome.outcome = "refused"
            elif response.finish_reason in FINISH_CAUSES or not said:
                # A cut answer, or none at all (empty, whitespace, reasoning only, or tool calls
                # where no tools were offered), is never presented as a complete reply.
                cause = FINISH_CAUSES.get(response.finish_reason, NO_ANSWER_CAUSE)
                driver.feed(AnswerInterrupted(cause))
                outcome.outcome, outcome.cause = "interrupted", cause
            else:
                driver.feed(AnswerEnded())
            return

    async def _run_tool(
        self,
        channel: Channel,
        inbound: InboundMessage,
        call: ToolCall,
        policy: ReplyPolicyLike,
        driver: DeliveryDriver,
    ) -> ChatMessage:
        driver.feed(ToolStarted(policy.redact_line(f"⏳ {call.name}…")))
        if call.name in self._agent.require_approval:
            await driver.drain()
            prompt = policy.redact_line(f"Run {call.name} with {call.arguments}?")
            approved = await channel.request_approval(inbound.chat_id, prompt)
            if not approved:
                driver.feed(ToolFinished())
                return ChatMessage(
                    "tool",
                    tool_error("the user did not approve this tool call"),
                    tool_call_id=call.id,
                    name=call.name,
                )
        output = await self._tools.run(call.name, call.arguments)
        driver.feed(ToolFinished())
        return ChatMessage("tool", output, tool_call_id=call.id, name=call.name)

    def _record(
        self,
        channel: Channel,
        inbound: InboundMessage,
        result: RoundResult | None,
        attempts: int,
        driver: DeliveryDriver,
        writes_before: int,
    ) -> None:
        response = result.response if result is not None else None
        usage = response.usage if response is not None else None
        record = RoundRecord(
            channel=channel.name,
            chat_id=inbound.chat_id,
            provider=result.provider if result is not None else None,
            attempts=attempts,
            ttft_ms=result.ttft_ms if result is not None else None,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            cached_tokens=usage.cached_input_tokens if usage else None,
            writes_sent=driver.writes_sent - writes_before,
            finish_reason=response.finish_reason if response is not None else None,
            outcome="interrupted"
            if response is None
            else ("tool_calls" if response.tool_calls else "ok"),
        )
        self._store.record_round(record)
        if self._on_round is not None:
            self._on_round(record)
