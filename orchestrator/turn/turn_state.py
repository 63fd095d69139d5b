"""The state of one running turn (architecture §5): the conversation it belongs to, the reply's
policy and delivery driver, the messages it adds to the history, and how it ended."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import anyio

from channels.base import Channel, InboundMessage
from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import AnswerInterrupted, AnswerRefused, TextEmitted
from orchestrator.turn.round_sink import ReplyPolicyLike, RoundSink
from orchestrator.turn.rounds import RoundRunner
from providers.base import ChatMessage

__all__ = [
    "ChatSetup",
    "ConversationKey",
    "ReplySpacing",
    "TurnOutcome",
    "TurnState",
    "conversation_key",
]


ConversationKey = tuple[str, str, str | None]
"""(channel name, chat id, thread id): one conversation (architecture §3)."""


def conversation_key(channel: str, message: InboundMessage) -> ConversationKey:
    return (channel, message.chat_id, message.thread_id)


@dataclass(frozen=True, slots=True)
class ChatSetup:
    """The round runner and the system prompt of one turn, from its chat's settings
    (:mod:`orchestrator.turn.chat_setup`)."""

    rounds: RoundRunner
    system_prompt: str


@dataclass
class TurnOutcome:
    """How a turn ended: ``ok``, ``interrupted``, ``refused``, ``stopped`` or ``undelivered``
    (the chat or thread was gone); its rounds; ``dropped_messages``: the most older messages
    of the history left out of one of its requests (they no longer fit the context window)."""

    outcome: str = "ok"
    cause: str | None = None
    rounds: int = 0
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    dropped_messages: int = 0
    answer: str = ""
    """The final answer's text (the model's, before redaction) when it ended complete."""


@dataclass
class OpenRound:
    """The round being served: what is needed to record it when it is cut short
    (``writes_before``: the driver's writes when it began)."""

    sink: RoundSink
    writes_before: int


@dataclass
class TurnState:
    """One reply's state while its turn runs."""

    channel: Channel
    inbound: InboundMessage
    policy: ReplyPolicyLike
    driver: DeliveryDriver
    history: list[ChatMessage]
    new_messages: list[ChatMessage]
    outcome: TurnOutcome = field(default_factory=TurnOutcome)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    stop_cause: str | None = None  # why the scope was cancelled
    said: bool = False  # some visible text in any round of this reply
    pending_text: str = ""  # the visible text of the last round served
    open_round: OpenRound | None = None
    last_round_id: int | None = None  # the store row of the last round recorded
    summary: str | None = None  # of the compacted turns (agent.history.compaction: summarize)
    call_numbers: itertools.count[int] = field(default_factory=itertools.count)
    setup: ChatSetup | None = None  # the chat's model and system prompt, loaded at its start
    estimate: int = 0  # estimated prompt tokens of the round being served
    """Numbers the reply's tool calls (its own and the provider's) for their status lines."""

    @property
    def where(self) -> str:
        """``channel:chat`` or ``channel:chat:thread``, for logs."""
        thread = self.inbound.thread_id
        return f"{self.channel.name}:{self.inbound.chat_id}" + (f":{thread}" if thread else "")

    def emit(self, text: str) -> None:
        """Feed what the policy released, if anything."""
        if text:
            self.driver.feed(TextEmitted(text))

    def interrupt(
        self, cause: str, *, marker: str | None = None, kind: str = "interrupted"
    ) -> None:
        """End the reply after its visible text with the interrupted (or given) marker."""
        self.emit(self.policy.finish())
        self.driver.feed(AnswerInterrupted(cause, marker))
        self.outcome.outcome, self.outcome.cause = kind, cause

    def refuse(self) -> None:
        assert self.policy.refusal is not None
        self.driver.feed(AnswerRefused(self.policy.refusal))
        self.outcome.outcome = "refused"


class ReplySpacing:
    """:class:`~channels.base.WriteSpacing` for writes after a delivered reply (its buttons,
    architecture §3 "Buttons"): the first no earlier than the delivery engine allows after the
    reply's last write, each next ``interval`` seconds after the one before (anyio's clock)."""

    def __init__(self, first_at: float, interval: float) -> None:
        self._next = first_at
        self._interval = interval

    def landed(self) -> None:
        self._next = anyio.current_time() + self._interval

    async def next_write(self) -> None:
        await anyio.sleep(max(0.0, self._next - anyio.current_time()))
