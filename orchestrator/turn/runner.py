"""The turn loop (architecture §5): one inbound message → rounds of model calls and tools → one
reply.

Theory of operation
-------------------
Per inbound message: load the conversation's history (keyed by channel, chat and thread) →
rounds. Each round streams the provider chain to ``Final`` (:mod:`orchestrator.turn.rounds`),
forwarding visible text through the reply's outbound policy into the delivery driver, whose
writes go to the message's thread. ``ToolCall``s are collected; with none, the answer is done.
Otherwise the turn's narration is flushed (``end_round`` + ``RoundEnded``), each tool shows its
status, runs (approval first where configured), its result is appended, and a fresh round
starts. After ``max_tool_rounds`` rounds with tools, one last call without tools asks for a
summary.

A running turn can be cut short: :meth:`TurnRunner.stop` (``/stop``, architecture §3 "Stop") cancels
that conversation's model work — the provider stream is closed — and the reply keeps its visible
text with ``⏹ Stopped.`` after it; :meth:`TurnRunner.cancel_all` (shutdown) does the same with
the interrupted marker. Either way the round that was running is recorded (``stopped`` or
``interrupted``) and the conversation's history gets the user's message and what was said.

Where the reply goes can change under it (architecture §3 "Network errors"): when the chat moved (a
Telegram group became a supergroup) delivery follows it, and the turn moves its conversation —
the rest of its reply, its history and the messages waiting behind it — to the new chat id
(``on_moved``, the daemon's). When the chat or thread is gone (a deleted forum topic) the model
work stops and the turn is ``undelivered``, its last round too.

A leading ``<think>…</think>`` block is reasoning (:class:`orchestrator.turn.think.ThinkFilter`).
Tool arguments are never redacted; tool results go to the model unredacted and reach the chat
only as status lines through the policy.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import replace

import anyio

from channels.base import Channel, InboundMessage
from config.models import AgentConfig
from orchestrator.delivery.driver import DeliveryDriver, as_task
from orchestrator.delivery.events import (
    AnswerEnded,
    AnswerInterrupted,
    RoundEnded,
)
from orchestrator.store import AsyncStore, ConversationStore, RoundRecord, Store
from orchestrator.tools.registry import ToolRegistry
from orchestrator.turn.chat_setup import (
    ChainFor,
    ChatSetup,
    buttons_after,
    load_setup,
    record_usage,
)
from orchestrator.turn.cut_answers import ReplyJournal
from orchestrator.turn.history_budget import (
    estimate_message,
)
from orchestrator.turn.inputs import user_message
from orchestrator.turn.prompt_fit import PromptFit
from orchestrator.turn.round_sink import ReplyPolicyFactory, RoundSink
from orchestrator.turn.rounds import RoundFailed, RoundResult, RoundRunner
from orchestrator.turn.tool_round import ToolTurn, run_calls
from orchestrator.turn.turn_state import (
    ConversationKey,
    OpenRound,
    TurnOutcome,
    TurnState,
    conversation_key,
)
from providers.base import ChatMessage, CompletionResponse, DocumentPart
from providers.errors import ContextLengthExceeded
from providers.events import ToolCall

__all__ = [
    "STOPPED_MARKER",
    "ConversationKey",
    "ReplyPolicyFactory",
    "TurnOutcome",
    "TurnRunner",
    "conversation_key",
]

log = logging.getLogger(__name__)

SHUTDOWN_CAUSE = "the bot is shutting down"
STOPPED_CAUSE = "stopped by the user"
STOPPED_MARKER = "⏹ Stopped."
UNDELIVERED_CAUSE = "the chat or topic is gone"
NO_ANSWER_CAUSE = "the model sent no answer"
FINISH_CAUSES = {
    "length": "the model stopped before finishing",
    "content_filter": "the model's content filter stopped it",
}


class TurnRunner:
    """Runs turns for one agent.

    Args:
        agent: the ``agent`` config section.
        rounds: the round runner over ``agent.providers``.
        tools: the tools offered to the model.
        store: history and round records (a blocking :class:`Store` is wrapped so that it is
            used off the event loop). It also records each reply in flight — from before its
            first write, with its message ids and its last message's text — until the reply
            ends, so that a hard kill is never invisible: the next start (or, on a shared
            store, the instance taking the conversation over) marks it interrupted
            (:mod:`orchestrator.turn.cut_answers`, architecture §7 "Store", §9).
        policies: makes one outbound policy per reply.
        on_round: called with each round's record after it is stored (metrics).
        on_moved: awaited with (channel, old chat id, new chat id) when a reply's chat moved
            (the daemon moves the conversation's waiting messages and history).
        chains: the round runner of a chat's model alias (``/model``); default: ``rounds``
            for every chat.
    """

    def __init__(
        self,
        *,
        agent: AgentConfig,
        rounds: RoundRunner,
        tools: ToolRegistry,
        store: Store | ConversationStore,
        policies: ReplyPolicyFactory,
        on_round: Callable[[RoundRecord], None] | None = None,
        on_moved: Callable[[str, str, str], Awaitable[None]] | None = None,
        chains: ChainFor | None = None,
    ) -> None:
        self.on_moved = on_moved
        self._chains: ChainFor = chains or (lambda alias: self._rounds)
        self._agent = agent
        self._rounds = rounds
        self._tools = tools
        self._store: ConversationStore = AsyncStore(store) if isinstance(store, Store) else store
        self._policies = policies
        self._on_round = on_round
        self._running: dict[ConversationKey, TurnState] = {}
        self._fit = PromptFit(tools, self._store)

    def cancel_all(self) -> None:
        """Stop every running turn's model work; each still delivers its interrupted marker."""
        for turn in self._running.values():
            self._cancel(turn, SHUTDOWN_CAUSE)

    def stop(self, key: ConversationKey) -> bool:
        """``/stop``: cut the running turn of conversation ``key`` short (its reply ends with
        ``⏹ Stopped.``). False when none runs."""
        turn = self._running.get(key)
        if turn is None or turn.stop_cause is not None:
            return False
        self._cancel(turn, STOPPED_CAUSE)
        return True

    @staticmethod
    def _cancel(turn: TurnState, cause: str) -> None:
        if turn.stop_cause is None:
            turn.stop_cause = cause
        turn.scope.cancel()

    async def run(
        self,
        channel: Channel,
        inbound: InboundMessage,
        documents: tuple[DocumentPart, ...] = (),
    ) -> TurnOutcome:
        """Answer ``inbound`` (with its screened ``documents``) in its chat and thread; returns
        when the reply is fully delivered.

        :meth:`stop` and :meth:`cancel_all` cut the model work short: the reply then ends with
        its marker. Cancelling the caller abandons delivery too."""
        turn, journal = self._begin(channel, inbound, documents)
        key = conversation_key(channel.name, inbound)
        await journal.begin()  # before the reply's first write
        await channel.answer_started(inbound.chat_id, inbound.thread_id, inbound.sender_id)
        async with anyio.create_task_group() as tg:
            tg.start_soon(as_task, turn.driver.run)
            self._running[key] = turn
            try:
                with turn.scope:
                    await self._answer(turn)
                # The model work is over: nothing left to stop (the key moves with the chat).
                self._release(conversation_key(channel.name, turn.inbound), turn)
                await channel.answer_finishing(turn.inbound.chat_id, turn.inbound.thread_id)
                if turn.scope.cancelled_caught:
                    await self._cut_short(turn)
            except Exception:
                log.exception("turn failed in %s", turn.where)
                turn.interrupt("the bot failed")
            finally:
                self._release(conversation_key(channel.name, turn.inbound), turn)
                if inbound.context is None:  # a stateless channel keeps no history
                    with anyio.CancelScope(shield=True):
                        await self._store.append(
                            channel.name, turn.inbound.chat_id, turn.new_messages, inbound.thread_id
                        )
        with anyio.CancelScope(shield=True):
            await journal.end()  # delivered or given up: nothing left to mark
            await buttons_after(turn)
        if turn.driver.stats.unreachable and turn.outcome.outcome != "undelivered":
            # The answer was complete, its delivery was not (e.g. the one message of "off").
            turn.outcome.outcome, turn.outcome.cause = "undelivered", UNDELIVERED_CAUSE
            if turn.last_round_id is not None:
                with anyio.CancelScope(shield=True):
                    await self._store.set_round_outcome(turn.last_round_id, "undelivered")
        return turn.outcome

    def _release(self, key: ConversationKey, turn: TurnState) -> None:
        if self._running.get(key) is turn:
            del self._running[key]

    def _begin(
        self, channel: Channel, inbound: InboundMessage, documents: tuple[DocumentPart, ...]
    ) -> tuple[TurnState, ReplyJournal]:
        policy = self._policies.new_reply(channel.name, inbound.chat_id, channel.visible_text)
        # The driver's callbacks reach the turn, built after the driver, weakly: the turn holds
        # the driver, so a strong reference back would make the whole turn (~90 objects) a
        # reference cycle, freed only by the cycle collector after it ended instead of when
        # its last reference goes (a full collection walks every such turn still waiting).
        this: weakref.ref[TurnState] | None = None

        async def moved(new_chat_id: str) -> None:
            turn = None if this is None else this()
            if turn is not None:
                await self._move(turn, new_chat_id)

        def unreachable() -> None:
            turn = None if this is None else this()
            if turn is not None:
                self._cancel(turn, UNDELIVERED_CAUSE)

        journal = ReplyJournal(
            self._store, channel.name, inbound.chat_id, inbound.thread_id, inbound.message_id
        )
        driver = DeliveryDriver(
            channel,
            inbound.chat_id,
            policy,
            reply_to=inbound.message_id,
            thread_id=inbound.thread_id,
            on_moved=moved,
            on_unreachable=unreachable,
            on_written=journal.written,
        )
        user = user_message(inbound, documents)
        turn = TurnState(channel, inbound, policy, driver, [], [user])
        this = weakref.ref(turn)
        return turn, journal

    async def _move(self, turn: TurnState, new_chat_id: str) -> None:
        """The reply's chat moved: the turn belongs to the new chat id from now on (its
        records, its history, ``/stop`` from there), and so does its conversation."""
        name, old = turn.channel.name, turn.inbound.chat_id
        old_key = conversation_key(name, turn.inbound)
        turn.inbound = replace(turn.inbound, chat_id=new_chat_id)
        if self._running.get(old_key) is turn:
            del self._running[old_key]
            self._running[conversation_key(name, turn.inbound)] = turn
        with anyio.CancelScope(shield=True):
            await self._store.move_conversation(name, old, new_chat_id)
            if self.on_moved is not None:
                await self.on_moved(name, old, new_chat_id)

    async def _cut_short(self, turn: TurnState) -> None:
        """After :meth:`stop` or :meth:`cancel_all`: record the round that was running, keep
        what it said, end the reply with the marker."""
        stopped = turn.stop_cause == STOPPED_CAUSE
        cut = turn.open_round
        # What the think filter held, too; a provider-run tool still running ends with it.
        text = cut.sink.end("stopped" if stopped else "interrupted") if cut is not None else ""
        undelivered = turn.stop_cause == UNDELIVERED_CAUSE
        if stopped:
            log.info("answer stopped in %s", turn.where)
            turn.interrupt(STOPPED_CAUSE, marker=STOPPED_MARKER, kind="stopped")
        elif undelivered:
            turn.interrupt(UNDELIVERED_CAUSE, kind="undelivered")
        else:
            turn.interrupt(turn.stop_cause or SHUTDOWN_CAUSE)
        self._keep_text(turn, text)
        if cut is not None:
            outcome = "stopped" if stopped else "interrupted"
            await self._record(turn, None, "undelivered" if undelivered else outcome)

    # -- the rounds -----------------------------------------------------------------------

    def running(self, key: ConversationKey) -> bool:
        return key in self._running

    def _setup(self, turn: TurnState) -> ChatSetup:
        assert turn.setup is not None, "the turn's setup is loaded first"
        return turn.setup

    async def context_fill(
        self, channel: str, chat_id: str, thread_id: str | None, alias: str | None
    ) -> float:
        """The conversation's history as a share of the prompt budget of its model (alias
        ``alias`` of ``agent.models``, or the chain) (0..1+), estimated (``/status``)."""
        history = await self._store.history(channel, chat_id, thread_id)
        used = sum(estimate_message(m) for m in history)
        return used / max(1, self._fit.limit(self._chains(alias)))

    async def _answer(self, turn: TurnState) -> None:
        inbound = turn.inbound
        turn.setup = await load_setup(self._store, self._agent, self._chains, turn)
        if inbound.context is not None:  # a stateless channel's own conversation
            turn.history = [_context_message(role, text) for role, text in inbound.context]
        else:
            turn.history = await self._store.history(
                turn.channel.name, inbound.chat_id, inbound.thread_id
            )
        if self._agent.history.compaction == "summarize" and inbound.context is None:
            turn.summary = await self._store.summary(
                turn.channel.name, inbound.chat_id, inbound.thread_id
            )
            await self._fit.compact(turn)
        max_rounds = self._agent.max_tool_rounds
        state = ToolTurn()
        for index in range(max_rounds + 1):
            last = index == max_rounds or state.guard.tripped
            offer_tools = not last and bool(self._tools.specs)
            result = await self._round(turn, last and index > 0, offer_tools)
            if result is None:
                return  # no provider could serve it: interrupted
            response = result.response
            calls = response.tool_calls if offer_tools else ()
            if not calls:
                self._finish(turn, response)
                return
            if not self._end_narration(turn):
                return  # refused
            await self._run_tools(turn, response, calls, state)

    async def _serve(
        self, turn: TurnState, summary: bool, offer_tools: bool, sink: RoundSink
    ) -> RoundResult:
        """Serve a round; a request the model rejected as too long for its context window is
        trimmed harder and sent once more. Raises :class:`RoundFailed`."""
        rounds = self._setup(turn).rounds
        request, estimate = self._fit.request(turn, summary, offer_tools)
        turn.estimate = estimate
        try:
            result = await rounds.run(request, sink, sink.pause)
        except RoundFailed as failed:
            if not isinstance(failed.error, ContextLengthExceeded):
                raise
            # The window is smaller than configured or estimated: requests from now on stay
            # under a share of the one rejected.
            ceiling = self._fit.squeeze(rounds, estimate)
            log.warning(
                "context window exceeded in %s: history trimmed to %d estimated tokens",
                turn.where,
                ceiling,
            )
            request, estimate = self._fit.request(turn, summary, offer_tools)
            turn.estimate = estimate
            try:
                result = await rounds.run(request, sink, sink.pause)
            except RoundFailed as again:
                history = [m for m in request.messages if m.role != "system"]
                if not isinstance(again.error, ContextLengthExceeded) or len(history) > 1:
                    raise
                # Nothing of the history was left: the message alone does not fit.
                alone = replace(again.context, alone=True)
                raise RoundFailed(again.error, again.attempts, alone) from None
        usage = result.response.usage
        self._fit.observe(
            result.provider, estimate, usage.input_tokens if usage is not None else None
        )
        return result

    async def _round(self, turn: TurnState, summary: bool, offer_tools: bool) -> RoundResult | None:
        """Serve one round; ``None`` when it failed (the reply is then interrupted)."""
        turn.policy.begin_round()
        sink = RoundSink(turn.policy, turn.driver, turn.call_numbers)
        turn.open_round = OpenRound(sink, turn.driver.writes_sent)
        turn.outcome.rounds += 1
        try:
            result = await self._serve(turn, summary, offer_tools, sink)
        except RoundFailed as failed:
            log.warning("answer interrupted in %s: %s (%s)", turn.where, failed.cause, failed.error)
            text = sink.end()
            turn.interrupt(failed.cause)
            self._keep_text(turn, text)
            await self._record(turn, None, "interrupted", attempts=failed.attempts)
            return None
        turn.pending_text = sink.end()
        turn.said = turn.said or bool(turn.pending_text.strip())
        outcome = "tool_calls" if result.response.tool_calls else "ok"
        await self._record(turn, result, outcome)
        return result

    @staticmethod
    def _keep_text(turn: TurnState, text: str) -> None:
        if text:
            turn.new_messages.append(ChatMessage("assistant", text))

    def _finish(self, turn: TurnState, response: CompletionResponse) -> None:
        """The last round ended: complete, cut by the model, empty or refused."""
        turn.emit(turn.policy.finish())
        turn.new_messages.append(
            ChatMessage("assistant", turn.pending_text, provider_items=response.provider_items)
        )
        if turn.policy.refusal:
            turn.refuse()
        elif response.finish_reason in FINISH_CAUSES or not turn.said:
            # A cut answer, or none at all (empty, whitespace, reasoning only, or tool calls
            # where no tools were offered), is never presented as a complete reply.
            cause = FINISH_CAUSES.get(response.finish_reason, NO_ANSWER_CAUSE)
            turn.driver.feed(AnswerInterrupted(cause))
            turn.outcome.outcome, turn.outcome.cause = "interrupted", cause
        else:
            turn.outcome.answer = turn.pending_text
            turn.driver.feed(AnswerEnded())

    @staticmethod
    def _end_narration(turn: TurnState) -> bool:
        """Flush the narration before the tools run; False when the policy refused it."""
        turn.emit(turn.policy.end_round())
        if turn.policy.refusal:
            turn.refuse()
            return False
        turn.driver.feed(RoundEnded())
        return True

    async def _run_tools(
        self,
        turn: TurnState,
        response: CompletionResponse,
        calls: tuple[ToolCall, ...],
        state: ToolTurn,
    ) -> None:
        """Run ``calls`` (:mod:`orchestrator.turn.tool_round`); the history gets the calls and their
        results together, so a turn cut short while a tool runs never leaves a call without its
        result (it keeps the narration alone)."""
        assistant = ChatMessage(
            "assistant",
            turn.pending_text,
            tool_calls=calls,
            provider_items=response.provider_items,
        )
        try:
            results = await run_calls(
                turn, calls, agent=self._agent, tools=self._tools, state=state
            )
        except anyio.get_cancelled_exc_class():
            self._keep_text(turn, turn.pending_text)
            raise
        turn.outcome.tool_calls.extend((call.name, call.arguments) for call in calls)
        turn.new_messages.extend([assistant, *results])

    async def _record(
        self,
        turn: TurnState,
        result: RoundResult | None,
        outcome: str,
        *,
        attempts: int | None = None,
    ) -> None:
        """Store the open round's record (counted now, written off the loop) and close it.
        ``attempts`` defaults to the result's, else to the attempts the sink saw."""
        assert turn.open_round is not None
        opened, turn.open_round = turn.open_round, None
        response = result.response if result is not None else None
        usage = response.usage if response is not None else None
        record = RoundRecord(
            channel=turn.channel.name,
            chat_id=turn.inbound.chat_id,
            thread_id=turn.inbound.thread_id,
            provider=result.provider if result is not None else None,
            attempts=attempts or (result.attempts if result is not None else opened.sink.attempts),
            ttft_ms=result.ttft_ms if result is not None else None,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            cached_tokens=usage.cached_input_tokens if usage else None,
            writes_sent=turn.driver.writes_sent - opened.writes_before,
            finish_reason=response.finish_reason if response is not None else None,
            outcome=outcome,
        )
        with anyio.CancelScope(shield=True):
            turn.last_round_id = await self._store.record_round(record)
            if turn.setup is not None:
                last = turn.new_messages[-1] if turn.new_messages else None
                text = last.content if last is not None and last.role == "assistant" else ""
                await record_usage(
                    self._store, turn, turn.setup.rounds, result, turn.estimate, text
                )
        if self._on_round is not None:
            self._on_round(record)


def _context_message(role: str, text: str) -> ChatMessage:
    """One ``(role, text)`` pair of :attr:`InboundMessage.context`; an unknown role is a user's."""
    if role == "system":
        return ChatMessage("system", text)
    return ChatMessage("assistant" if role == "assistant" else "user", text)
