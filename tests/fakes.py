"""Test doubles for delivery: an in-memory chat, a recording channel, a guard stub, and a
scripted runner for the delivery engine on a fake clock.

- :class:`FakeChat` is the chat itself, synchronous: it applies sends, edits and deletes,
  enforces the length limit (``MessageTooLong``) and "not modified", fails on command
  (:class:`Fail`), honours its own flood waits, and records every write (:class:`ChatWrite`) and
  every state a user could see (:attr:`FakeChat.states`).
- :class:`RecordingChannel` is a real :class:`channels.base.Channel` over a :class:`FakeChat`,
  for driver and full-pipeline tests (``await channel.send_message(...)`` etc.). Its config is
  a :class:`FakeChannelConfig`; times come from the event loop (``anyio.current_time``), so
  under ``looptime`` they are virtual.
- :class:`GuardStub` is a :class:`~orchestrator.delivery.hooks.PiecePolicy` recording each piece.
- :class:`ScriptedDelivery` runs a :class:`~orchestrator.delivery.engine.DeliveryEngine` against
  a :class:`FakeChat` on a fake clock, without an event loop.

Example::

    chat = FakeChat(ChannelLimits(4096, "utf16"), fail=[Fail("edit", 3, rate_limited(9))])
    run = ScriptedDelivery(DeliverySettings(mode="partial"), chat=chat)
    run.play([(0.0, TextEmitted("Hello")), (0.5, AnswerEnded())])
    assert chat.visible() == ["Hello"]
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from channels.base import (
    UNSPACED,
    Channel,
    ChannelLimits,
    InboundHandler,
    InboundMessage,
    MessageRef,
    Rendering,
    WriteSpacing,
)
from channels.errors import (
    ChannelError,
    ChannelRateLimited,
    ChannelTimeout,
    ChannelUnavailable,
    ChannelWriteFailed,
    MessageGone,
    MessageNotModified,
    MessageTooLong,
)
from orchestrator.delivery.engine import DeliveryEngine
from orchestrator.delivery.events import (
    Action,
    DeleteMessage,
    DeliveryEvent,
    EditMessage,
    GuardPiece,
    PieceGuarded,
    PieceWithheld,
    SendMessage,
    SendTyping,
    SleepUntil,
    WriteFailed,
    WriteSucceeded,
)
from orchestrator.delivery.hooks import span_of
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import measure

__all__ = [
    "ChatWrite",
    "Fail",
    "FakeChannelConfig",
    "FakeChat",
    "GuardStub",
    "Message",
    "RecordingChannel",
    "ScriptedDelivery",
    "gone",
    "rate_limited",
    "refused",
    "renderer",
    "timeout",
    "too_long",
    "write_failed",
]

WriteKindName = Literal["send", "edit", "delete", "typing"]


# -- rendering ----------------------------------------------------------------------------


def renderer(
    form: Callable[[str], str], unit: Literal["utf16", "chars"] = "utf16"
) -> Callable[[str], Rendering]:
    """A channel renderer whose formatted form is ``form(text)`` and whose length is that of
    ``text`` in ``unit`` (formatting adds no visible characters)."""
    limits = ChannelLimits(1 << 30, unit)

    def render(text: str) -> Rendering:
        return Rendering(form(text), measure(limits, text))

    return render


# -- failures -----------------------------------------------------------------------------


def rate_limited(retry_after: float) -> Callable[[], ChannelError]:
    return lambda: ChannelRateLimited(retry_after)


def timeout() -> ChannelError:
    return ChannelTimeout("timed out")


def gone() -> ChannelError:
    return MessageGone("message to edit not found")


def refused() -> ChannelError:
    return ChannelUnavailable("Internal Server Error (500)")


def write_failed() -> ChannelError:
    return ChannelWriteFailed("Bad Request: can't parse entities")


def too_long() -> ChannelError:
    return MessageTooLong(0, 0)


@dataclass
class Fail:
    """Make a write fail.

    Args:
        kind: which writes count (``"any"``: sends, edits and deletes).
        nth: the 1-based number of the write of that kind that fails (``None``: every write
            that ``when`` accepts).
        error: makes the exception to raise, e.g. ``rate_limited(9)``, ``timeout``.
        lands: for a timeout, whether the write took effect before the error.
        when: an extra condition on the write ``(kind, message_id, text, formatted)``.
        times: how many times the rule fires at most.
    """

    kind: Literal["send", "edit", "delete", "any"]
    nth: int | None
    error: Callable[[], ChannelError]
    lands: bool = False
    when: Callable[[str, str | None, str, bool], bool] | None = None
    times: int = 1

    def matches(self, kind: str, count: int, message_id: str | None, text: str, fmt: bool) -> bool:
        if self.times <= 0 or (self.kind != "any" and self.kind != kind):
            return False
        if self.nth is not None and self.nth != count:
            return False
        return self.when is None or self.when(kind, message_id, text, fmt)


# -- the chat -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatWrite:
    """One write attempt. ``outcome`` is ``"ok"`` or the exception's class name."""

    t: float
    kind: WriteKindName
    message_id: str | None
    text: str
    formatted: bool
    outcome: str = "ok"


@dataclass
class Message:
    id: str
    text: str
    formatted: bool
    edits: int = 0
    deleted: bool = False


@dataclass
class FakeChat:
    """An in-memory chat (see the module docstring).

    Args:
        limits: the length limit enforced on every send and edit.
        fail: failure rules, consulted in order; the first that matches fires.
        not_modified: raise ``MessageNotModified`` for an edit equal to what is shown.
        enforce_flood_wait: after raising ``ChannelRateLimited(r)`` at ``t``, refuse every
            write before ``t + r`` (another ``ChannelRateLimited``) and record it in
            :attr:`early_writes`.

    Attributes:
        messages: every message sent, by id (deleted ones flagged), oldest first.
        writes: every write attempt (:class:`ChatWrite`), failed ones included.
        states: after each write that changed the chat, ``(t, visible texts)``.
        snapshots: the same with ids: ``(t, ((message_id, text), ...))``.
        typing: when the typing indicator was sent.
        early_writes: writes attempted during a flood wait (should stay empty).
        blocked_until: the end of the current flood wait.
    """

    limits: ChannelLimits = field(default_factory=lambda: ChannelLimits(4096, "utf16"))
    fail: list[Fail] = field(default_factory=list)
    not_modified: bool = True
    enforce_flood_wait: bool = True
    messages: dict[str, Message] = field(default_factory=dict)
    writes: list[ChatWrite] = field(default_factory=list)
    states: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)
    snapshots: list[tuple[float, tuple[tuple[str, str], ...]]] = field(default_factory=list)
    typing: list[float] = field(default_factory=list)
    early_writes: list[ChatWrite] = field(default_factory=list)
    blocked_until: float = float("-inf")
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _counts: dict[str, int] = field(default_factory=dict)

    # -- inspection -----------------------------------------------------------------------

    def visible(self) -> list[str]:
        """The texts a user sees now, oldest message first."""
        return [m.text for m in self.messages.values() if not m.deleted]

    def visible_messages(self) -> list[Message]:
        return [m for m in self.messages.values() if not m.deleted]

    def chat_writes(self, *kinds: str) -> list[ChatWrite]:
        """Writes of those kinds (default: send, edit, delete), failed ones included."""
        wanted = kinds or ("send", "edit", "delete")
        return [w for w in self.writes if w.kind in wanted]

    # -- writes ---------------------------------------------------------------------------

    def _check(self, t: float, kind: str, message_id: str | None, text: str, fmt: bool) -> bool:
        """Raise the programmed failure, if any; returns whether a timeout lands the write."""
        self._counts[kind] = self._counts.get(kind, 0) + 1
        self._counts["any"] = self._counts.get("any", 0) + 1
        if t < self.blocked_until and self.enforce_flood_wait:
            self.early_writes.append(ChatWrite(t, kind, message_id, text, fmt))  # type: ignore[arg-type]
            raise ChannelRateLimited(self.blocked_until - t)
        for rule in self.fail:
            count = self._counts.get(rule.kind, 0)
            if rule.matches(kind, count, message_id, text, fmt):
                rule.times -= 1
                error = rule.error()
                if isinstance(error, ChannelRateLimited):
                    self.blocked_until = t + error.retry_after
                if isinstance(error, ChannelTimeout) and rule.lands:
                    return True
                raise error
        if kind != "delete" and self.limits.measure(text) > self.limits.max_length:
            raise MessageTooLong(self.limits.max_length, self.limits.measure(text))
        return False

    def _record(self, write: ChatWrite) -> None:
        self.writes.append(write)

    def snapshot(self) -> tuple[tuple[str, str], ...]:
        """``(message_id, text)`` of every visible message, oldest first."""
        return tuple((m.id, m.text) for m in self.visible_messages())

    def _snapshot(self, t: float) -> None:
        self.states.append((t, tuple(self.visible())))
        self.snapshots.append((t, self.snapshot()))

    def send(self, t: float, text: str, formatted: bool = False) -> str:
        try:
            lands = self._check(t, "send", None, text, formatted)
        except ChannelError as exc:
            self._record(ChatWrite(t, "send", None, text, formatted, type(exc).__name__))
            raise
        message_id = str(next(self._ids))
        self.messages[message_id] = Message(message_id, text, formatted)
        outcome = "ChannelTimeout" if lands else "ok"
        self._record(ChatWrite(t, "send", message_id, text, formatted, outcome))
        self._snapshot(t)
        if lands:
            raise ChannelTimeout("timed out (the message was sent)")
        return message_id

    def edit(self, t: float, message_id: str, text: str, formatted: bool = False) -> None:
        message = self.messages.get(message_id)
        try:
            if message is None or message.deleted:
                self._counts["edit"] = self._counts.get("edit", 0) + 1
                raise MessageGone("message to edit not found")
            lands = self._check(t, "edit", message_id, text, formatted)
            if self.not_modified and (message.text, message.formatted) == (text, formatted):
                raise MessageNotModified("message is not modified")
        except ChannelError as exc:
            self._record(ChatWrite(t, "edit", message_id, text, formatted, type(exc).__name__))
            raise
        message.text, message.formatted = text, formatted
        message.edits += 1
        self._record(
            ChatWrite(t, "edit", message_id, text, formatted, "ChannelTimeout" if lands else "ok")
        )
        self._snapshot(t)
        if lands:
            raise ChannelTimeout("timed out (the edit was applied)")

    def delete(self, t: float, message_id: str) -> None:
        message = self.messages.get(message_id)
        try:
            if message is None or message.deleted:
                raise MessageGone("message to delete not found")
            lands = self._check(t, "delete", message_id, "", False)
        except ChannelError as exc:
            self._record(ChatWrite(t, "delete", message_id, "", False, type(exc).__name__))
            raise
        message.deleted = True
        self._record(
            ChatWrite(t, "delete", message_id, "", False, "ChannelTimeout" if lands else "ok")
        )
        self._snapshot(t)
        if lands:
            raise ChannelTimeout("timed out (the message was deleted)")

    def user_deletes(self, message_id: str) -> None:
        """The user deleted a message (the next edit of it raises ``MessageGone``)."""
        self.messages[message_id].deleted = True


# -- the channel --------------------------------------------------------------------------


class FakeChannelConfig(BaseModel):
    """Config of a :class:`RecordingChannel`: the capability fields channels share, plus the
    limit and the per-write latency."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["fake"] = "fake"
    stream_mode: Literal["off", "partial", "multi_message"] = "partial"
    draft_update_interval_ms: int = Field(default=1000, ge=1)
    multi_message_delay_ms: int = Field(default=800, ge=0)
    max_edits_per_message: int | None = Field(default=None, ge=1)
    show_tool_status: bool = False
    max_length: int = Field(default=4096, ge=16)
    unit: Literal["utf16", "chars"] = "utf16"
    multi_message_unit: Literal["paragraph", "turn"] = "paragraph"
    latency_ms: int = Field(default=0, ge=0, description="each write takes this long")
    allowed_users: list[str | int] = Field(default_factory=lambda: ["*"])


class RecordingChannel(Channel):
    """A :class:`Channel` whose chat is a :class:`FakeChat` (see the module docstring).

    Args:
        config: capabilities and limits (default: Telegram-like ``partial``).
        fail: failure rules for the chat.
        name: the channel's name.
        on_inbound: where :meth:`inject` delivers inbound messages.
        approvals: answers :meth:`request_approval` returns in order (then ``None``).

    Attributes:
        chat: the :class:`FakeChat` (writes, states, typing, messages); write times are the
            loop's clock when the write took effect (after ``latency_ms``).
        prompts: approval prompts asked, in order.
        replies: the ``reply_to`` of each message sent, by message id.
    """

    def __init__(
        self,
        config: FakeChannelConfig | None = None,
        *,
        fail: list[Fail] | None = None,
        name: str = "fake",
        on_inbound: InboundHandler | None = None,
        approvals: Iterable[bool | None] = (),
    ) -> None:
        config = config or FakeChannelConfig()
        super().__init__(name, config, on_inbound or _ignore_inbound)
        self.limits = ChannelLimits(config.max_length, config.unit)
        self.multi_message_unit = config.multi_message_unit
        self.chat = FakeChat(self.limits, fail=list(fail or []))
        self.prompts: list[str] = []
        self.replies: dict[str, str | None] = {}
        self.threads: list[str | None] = []  # the thread_id of every send, in order
        """``reply_to`` of each message sent, by message id."""
        self._approvals: deque[bool | None] = deque(approvals)
        self.started = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def inject(self, text: str, *, chat_id: str = "chat", sender: str = "user") -> None:
        """Deliver an inbound message as if ``sender`` wrote ``text`` in ``chat_id``."""
        message = InboundMessage(self.name, chat_id, sender, sender, text, f"in-{len(text)}")
        await self._on_inbound(message)

    async def _latency(self) -> float:
        delay = self.config.latency_ms / 1000
        if delay:
            await anyio.sleep(delay)
        return anyio.current_time()

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        t = await self._latency()
        self.threads.append(thread_id)
        message_id = self.chat.send(t, text, formatted)
        self.replies[message_id] = reply_to
        return MessageRef(chat_id, message_id)

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        t = await self._latency()
        self.chat.edit(t, ref.message_id, text, formatted)

    async def _delete_message(self, ref: MessageRef) -> None:
        t = await self._latency()
        self.chat.delete(t, ref.message_id)

    async def _send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        self.chat.typing.append(anyio.current_time())

    async def _request_approval(
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        self.prompts.append(prompt)
        return self._approvals.popleft() if self._approvals else None


async def _ignore_inbound(message: InboundMessage) -> None:
    return None


# -- the guard ----------------------------------------------------------------------------


class GuardStub:
    """A piece policy: records every piece; ``transform`` is the hook (it rewrites, cancels with
    ``None`` or raises); redaction changes nothing.

    With no ``transform`` it has no hook (the driver then runs none); :class:`ScriptedDelivery`
    records the pieces either way.
    """

    def __init__(
        self,
        transform: Callable[[str], str | None] | None = None,
        *,
        hook_timeout_secs: float = 5.0,
    ) -> None:
        self.pieces: list[str] = []
        self.lines: list[str] = []
        self.redacted: list[str] = []
        self._transform = transform
        self.hook_timeout_secs = hook_timeout_secs

    @property
    def has_hook(self) -> bool:
        return self._transform is not None

    def hook_piece_here(self, text: str) -> str | None:
        """The hook at once, in this thread (what :class:`ScriptedDelivery` runs)."""
        self.pieces.append(text)
        return self._transform(text) if self._transform else text

    async def hook_piece(self, text: str) -> str | None:
        return self.hook_piece_here(text)

    def redact_piece(self, text: str, span: tuple[int, int] | None = None) -> str:
        self.redacted.append(text)
        return text

    def redact_line(self, text: str) -> str:
        self.lines.append(text)
        return text


# -- the scripted runner ------------------------------------------------------------------


class ScriptedDelivery:
    """Runs an engine against a :class:`FakeChat` on a fake clock (no event loop).

    Write outcomes are fed ``latency`` seconds after the write started; events timed earlier
    than that wait, as they would in the driver.

    Args:
        settings: the engine's settings.
        guard: default :class:`GuardStub` (pass-through); a ``ReplyPolicy`` fits too (this
            runner calls the hook in its own thread: ``hook_piece_here``).
        chat: default: a :class:`FakeChat` with the settings' limits.
        latency: seconds each write takes.
    """

    def __init__(
        self,
        settings: DeliverySettings,
        *,
        guard: Any = None,
        chat: FakeChat | None = None,
        latency: float = 0.0,
    ) -> None:
        self.settings = settings
        self.guard = guard or GuardStub()
        self.engine = DeliveryEngine(settings, self.guard.redact_line)
        self.chat = chat or FakeChat(settings.limits)
        self.latency = latency
        self.now = 0.0
        self.wake: float | None = None
        self.actions: list[tuple[float, Action]] = []
        self.fed: list[tuple[float, int, DeliveryEvent]] = []
        """``(time, len(chat.writes) then, event)`` for each event fed."""

    def _execute(self, actions: list[Action]) -> None:
        queue = deque(actions)
        self.wake = None
        while queue:
            action = queue.popleft()
            self.actions.append((self.now, action))
            match action:
                case SleepUntil(deadline=deadline):
                    self.wake = deadline
                case SendTyping():
                    self.chat.typing.append(self.now)
                case GuardPiece():
                    queue.extend(self.engine.handle(self._verdict(action), self.now))
                case _:
                    outcome = self._write(action)
                    self.now += self.latency
                    queue.extend(self.engine.handle(outcome, self.now))

    def _verdict(self, piece: GuardPiece) -> DeliveryEvent:
        """The hook at once (no time passes), as the driver runs it."""
        try:
            verdict = self.guard.hook_piece_here(piece.text)
        except Exception:
            return PieceWithheld(piece.piece_id)
        if verdict is None:
            return PieceGuarded(piece.piece_id, None)
        redacted = self.guard.redact_piece(verdict, span_of(piece, verdict))
        return PieceGuarded(piece.piece_id, redacted)

    def _write(self, action: Action) -> DeliveryEvent:
        try:
            match action:
                case SendMessage(text=text, formatted=formatted):
                    return WriteSucceeded(self.chat.send(self.now, text, formatted))
                case EditMessage(message_id=message_id, text=text, formatted=formatted):
                    self.chat.edit(self.now, message_id, text, formatted)
                case DeleteMessage(message_id=message_id):
                    self.chat.delete(self.now, message_id)
            return WriteSucceeded()
        except ChannelRateLimited as exc:
            return WriteFailed("rate_limited", exc.retry_after)
        except MessageNotModified:
            return WriteFailed("not_modified")
        except MessageTooLong:
            return WriteFailed("too_long")
        except MessageGone:
            return WriteFailed("gone")
        except ChannelTimeout:
            return WriteFailed("timeout")
        except ChannelUnavailable:
            return WriteFailed("refused")
        except ChannelError:
            return WriteFailed("failed")

    def advance_to(self, t: float) -> None:
        """Let time pass until ``t``, polling at every deadline the engine asked for."""
        while self.wake is not None and self.wake <= t:
            self.now = max(self.now, self.wake)
            self._execute(self.engine.poll(self.now))
        self.now = max(self.now, t)

    def feed(self, event: DeliveryEvent) -> None:
        self.fed.append((self.now, len(self.chat.writes), event))
        self._execute(self.engine.handle(event, self.now))

    def play(
        self,
        timeline: Iterable[tuple[float, DeliveryEvent]],
        *,
        finish: bool = True,
        limit: float = 3600,
    ) -> None:
        """Feed each ``(t, event)`` at ``t`` (or later, if a write was in flight), starting with
        a poll at the current time; then, with ``finish``, run until the engine is finished."""
        self._execute(self.engine.poll(self.now))
        for t, event in timeline:
            self.advance_to(t)
            self.feed(event)
        if finish:
            self.finish(limit=limit)

    def finish(self, *, limit: float = 3600) -> None:
        """Run until the engine is finished (AssertionError if it stalls or takes ``limit``)."""
        while not self.engine.finished:
            assert self.wake is not None, "the engine stalled: nothing to wait for, not finished"
            assert self.wake <= limit, f"delivery still running at t={self.wake}"
            self.advance_to(self.wake)
