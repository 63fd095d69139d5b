"""Carries out a delivery engine's actions through a channel (architecture §3): the I/O half.

Theory of operation
-------------------
The turn loop :meth:`~DeliveryDriver.feed`\\ s events (synchronous, never blocks) while
:meth:`~DeliveryDriver.run` runs in the turn's task group. Each pass of the loop applies every
queued event to the engine at once (so a burst of text costs one write with the newest text),
polls it, and executes what it returns: writes through the channel's primitives, one at a time
(one platform write per action), each outcome fed straight back; typing; a ``GuardPiece``, run
in a task of its own (:func:`~orchestrator.delivery.hooks.guard_piece`: the hook in a worker
process, bounded by ``hook_timeout_secs``), whose verdict comes back through :meth:`feed` — so a
slow hook stalls neither this chat's typing nor any other chat; or a wait until the engine's
``SleepUntil`` deadline or the next :meth:`feed`, whichever comes first. ``run`` returns the
delivery's :class:`~orchestrator.delivery.engine.DeliveryStats` once the engine is finished.

Text does not wake the loop when no write could start before the loop wakes anyway
(``DeliveryEngine.quiet_until``: the spacing after the last write, a rate limit): it waits in the
queue and is applied, newest text and all, when the wait ends; a wait that would outlast that
time is shortened to it. So a model streaming 50 deltas a second into a chat edited once a second
costs one wakeup of this task per edit, not one per delta. Not when a hook guards the pieces of a
``multi_message`` or ``off`` reply: a finished piece's hook starts as soon as its text is there.
Text flows one way, taken when the driver asks: a caller may hold its text back before its
policy, give the driver a source (:meth:`~DeliveryDriver.pull_from`) and only say that it holds
some (:meth:`~DeliveryDriver.text_ready`); each pass of the loop (and :meth:`~DeliveryDriver.pull`,
at the caller's boundaries) takes the source's text, through the policy, joined (the round's sink
does so: the policy then runs once per write, not once per delta). Whether text could wait
(:meth:`~DeliveryDriver.text_waits`) is a query; shortening the wait to when a write could
start is the explicit command half of :meth:`~DeliveryDriver.text_ready` and :meth:`feed`.

Each write goes through the reply's :class:`~orchestrator.delivery.chat_writes.ChatWriter`
(one platform write per action), which turns channel errors into write outcomes by one table
(:data:`~orchestrator.delivery.chat_writes.WRITE_OUTCOMES`) and follows a chat that moved.

Cancelling ``run`` abandons the reply: a write in progress may or may not land, a hook still
running is cancelled (its worker process is killed), and nothing more is written.
"""

from __future__ import annotations

import asyncio
import logging
import math
import traceback
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import anyio
import anyio.abc

from channels.base import Channel, MessageRef, WriteSpacing
from orchestrator.delivery.chat_writes import (
    MAX_MOVES,
    WRITE_OUTCOMES,
    ChatSpacing,
    ChatWriter,
    write_outcome,
)
from orchestrator.delivery.engine import DeliveryEngine, DeliveryProtocolError, DeliveryStats
from orchestrator.delivery.events import (
    Action,
    DeleteMessage,
    DeliveryEvent,
    EditMessage,
    GuardPiece,
    SendMessage,
    SendTyping,
    SleepUntil,
    TextEmitted,
    WrittenElsewhere,
)
from orchestrator.delivery.hooks import PiecePolicy, guard_piece
from orchestrator.delivery.settings import DeliverySettings

__all__ = ["MAX_MOVES", "WRITE_OUTCOMES", "DeliveryDriver", "as_task", "write_outcome"]
# MAX_MOVES, WRITE_OUTCOMES and write_outcome live in chat_writes.py (re-exported: the driver is
# where the delivery's boundary is named).

log = logging.getLogger(__name__)

T = TypeVar("T")


async def _stay(chat_id: str) -> None:
    return None


def _ignore() -> None:
    return None


def _nothing() -> str:
    return ""


async def as_task(run: Callable[[], Awaitable[object]]) -> None:
    """``await run()`` as a task of a task group (the driver's :meth:`~DeliveryDriver.run` in
    the turn's, a hook's verdict in the driver's), leaving no reference cycle when cancelled.

    anyio's task group keeps a cancelled child's error in a cycle of its own (its ``task_done``
    callback's frame holds the error, whose traceback holds that frame), and the traceback
    holds the frames ``run`` left, which hold the driver, its engine, the reply's policy and
    window: all would wait for the cycle collector. So those frames' locals are cleared (a
    child's cancellation is dropped by its task group: nothing shows it) and this frame lets go
    of ``run`` before the cancellation goes on."""
    try:
        await run()
    except anyio.get_cancelled_exc_class() as cancelled:
        del run
        traceback.clear_frames(cancelled.__traceback__)
        raise


class DeliveryDriver:
    """Delivers one reply to one chat.

    Args:
        channel: executes the writes.
        chat_id: the chat to write to.
        policy: the reply's outbound policy (:class:`~orchestrator.delivery.hooks.PiecePolicy`):
            the hook, the redaction of its output, and of the lines the engine composes.
        reply_to: the inbound message id the reply's first message answers.
        thread_id: the thread every message of the reply goes to (``None``: none).
        clock: monotonic time in seconds; default the event loop's clock: while :meth:`run`
            runs, the ``time`` of the loop running it, bound once (``anyio.current_time``, used
            outside it, finds the loop and its backend on every call, and the driver reads the
            clock several times per write); ``time.monotonic`` on asyncio, virtual time under
            ``looptime``.
        settings: override ``DeliverySettings.from_channel(channel)``.
        on_moved: awaited with the new chat id when the chat moved (a Telegram group became a
            supergroup): the conversation moves with it.
        on_unreachable: called once when the chat or thread is gone (a deleted forum topic).
        on_written: awaited after each send or edit that landed, with the message, its text
            as sent and whether it was formatted (the daemon keeps the reply's draft in a
            shared store, architecture §9).
    """

    def __init__(
        self,
        channel: Channel,
        chat_id: str,
        policy: PiecePolicy,
        *,
        reply_to: str | None = None,
        thread_id: str | None = None,
        clock: Callable[[], float] | None = None,
        settings: DeliverySettings | None = None,
        on_moved: Callable[[str], Awaitable[None]] = _stay,
        on_unreachable: Callable[[], None] = _ignore,
        on_written: Callable[[MessageRef, str, bool], Awaitable[None]] | None = None,
    ) -> None:
        self._channel = channel
        self._writer = ChatWriter(
            channel,
            chat_id,
            reply_to=reply_to,
            thread_id=thread_id,
            on_moved=on_moved,
            on_unreachable=on_unreachable,
            on_written=on_written,
        )
        self._clock = clock or anyio.current_time
        self._loop_clock = clock is None
        """Whether :meth:`run` binds the clock to the loop running it."""
        self._policy = policy
        self.engine = DeliveryEngine(
            settings or DeliverySettings.from_channel(channel), policy.redact_line
        )
        self._inbox: deque[DeliveryEvent] = deque()
        self._wakeup: asyncio.Event | None = None
        self._waiting = False
        """Whether the loop waits (for :attr:`_wakeup`, set by :meth:`feed` or by ``_timer``)."""
        self._timer: asyncio.Handle | None = None
        """Sets :attr:`_wakeup` when the current wait ends by time (``None``: it does not)."""
        self._wait_until = math.inf
        """When the current wait ends, on ``clock`` (``inf``: at the next event)."""
        self._quiet = -math.inf
        """Before this time (on ``clock``) fed text cannot start anything: see :meth:`feed`."""
        self._told = False
        """:meth:`text_ready` was heard in the current wait: later calls change nothing."""
        self._text_waits = self.engine.settings.mode == "partial" or not policy.has_hook
        self._writing = False
        """A send, edit or delete is awaited: the next write starts no sooner than the
        interval after it completes (the spacing is counted from a write's outcome)."""
        self._changed: anyio.Event | None = None
        self._source: Callable[[], str] = _nothing
        """What the caller holds back, through its policy: pulled before each pass of the loop
        and by :meth:`pull` (see :meth:`pull_from`)."""
        self._closed = False
        self._hooks: anyio.abc.TaskGroup | None = None

    @property
    def chat_id(self) -> str:
        """The chat the reply is written to (the new id once the chat moved)."""
        return self._writer.chat_id

    @property
    def writes_sent(self) -> int:
        """Sends, edits and deletes started so far."""
        return self.engine.writes_sent

    @property
    def stats(self) -> DeliveryStats:
        return self.engine.stats

    def feed(self, event: DeliveryEvent) -> None:
        """Queue an event for the engine and wake :meth:`run` (text only when it could start
        something before the loop wakes anyway: see the module docstring). Never blocks."""
        self._inbox.append(event)
        wakeup = self._wakeup
        if wakeup is None:
            return
        if type(event) is TextEmitted and self.text_waits():
            self._shorten_wait(wakeup)
            return
        wakeup.set()

    def text_waits(self) -> bool:
        """Whether text given now could start nothing before the loop's next pass anyway (see
        the module docstring). A query: it changes nothing (:meth:`text_ready` and
        :meth:`feed` shorten the wait, explicitly)."""
        if self._wakeup is None or not self._waiting:
            return False
        quiet = self._quiet
        return self._wait_until <= quiet or quiet != -math.inf

    def quiet_for(self) -> float:
        """Seconds from now until text given now could start a write at the earliest: while
        a write is in flight, the interval (the spacing counts from its outcome); ``0.0`` when
        it could start one now or at the loop's next pass (before the first write, or when
        every piece of text wakes the loop: a guarded ``multi_message`` / ``off`` reply). A
        query: the round's reads are paced by it
        (:meth:`orchestrator.turn.round_sink.RoundSink.pause`)."""
        if self._writing and self._text_waits:
            return self.engine.settings.interval
        if not self.text_waits():
            return 0.0
        return max(0.0, self._quiet - self._clock())

    def pull_from(self, source: Callable[[], str]) -> None:
        """Text comes from ``source``: it returns what the caller held back, through its policy
        (``""``: nothing), and is called before each pass of the loop, by :meth:`pull` and by
        :meth:`drain`; it replaces the source given before. The caller tells the driver it
        holds text with :meth:`text_ready` and never feeds that text itself: it only flows
        when the driver asks. A closed driver (its :meth:`run` ended) keeps no source."""
        if not self._closed:
            self._source = source

    def text_ready(self) -> None:
        """The source holds new text: wake the loop to pull it, unless it could start nothing
        before the loop wakes anyway (:meth:`text_waits`); then the wait is shortened to when a
        write could start. Never blocks."""
        if self._told:
            return  # once per wait: a source's every delta calls this
        wakeup = self._wakeup
        if wakeup is None:
            return  # not running: its first pass pulls it
        if self.text_waits():
            self._shorten_wait(wakeup)
        else:
            wakeup.set()
        self._told = self._waiting

    def pull(self) -> None:
        """Take what the source holds now, queued before anything fed after (a status line,
        the round's end)."""
        text = self._source()
        if text:
            self.feed(TextEmitted(text))

    def _shorten_wait(self, wakeup: asyncio.Event) -> None:
        """End the current wait no later than when a write could start (the command half of
        :meth:`text_waits`; at most once per wait)."""
        quiet = self._quiet
        if self._wait_until > quiet:
            self._wake_in(quiet - self._clock(), wakeup)
            self._wait_until = quiet

    async def drain(self) -> None:
        """Wait until everything fed so far that can be written has been written (typing
        aside): e.g. a turn's narration and tool status before an approval prompt. A rate limit
        is waited out. Returns at once when :meth:`run` has ended."""
        self.pull()
        while not self._closed and (self._inbox or self.engine.pending):
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    async def write_elsewhere(self, write: Callable[[WriteSpacing], Awaitable[T]]) -> T:
        """Make a write to the reply's chat that is not the engine's (an approval prompt,
        architecture §5 "Tools"): once everything fed so far that can be written has been
        written (:meth:`drain`), and no earlier than the chat's spacing allows after the last
        write (architecture §3 "Spacing"); the engine's next write is spaced from its end
        (:class:`~orchestrator.delivery.events.WrittenElsewhere`). Returns what ``write``
        returns; its exception propagates. ``write`` gets the chat's spacing for the writes it
        makes after its first (the prompt's outcome edit)."""
        await self.drain()
        if not self._closed:
            await anyio.sleep(max(0.0, self.engine.next_write_at() - self._clock()))
        try:
            return await write(ChatSpacing(self._clock, self.engine.settings.interval))
        finally:
            self.feed(WrittenElsewhere())

    async def run(self) -> DeliveryStats:
        """Deliver until the engine is finished; returns its stats."""
        self._wakeup = asyncio.Event()
        if self._loop_clock:
            self._clock = asyncio.get_running_loop().time
        try:
            async with anyio.create_task_group() as hooks:
                self._hooks = hooks
                await self._loop()
                hooks.cancel_scope.cancel()  # nothing awaits a verdict any more
        finally:
            if self._loop_clock:
                self._clock = anyio.current_time
            self._hooks = None
            self._closed = True
            # A closed driver takes no more text; and its source (a round's sink, which holds
            # the driver) is let go, so the two are not a reference cycle left to the collector.
            self._source = _nothing
            self._notify()
        stats = self.engine.stats
        if stats.writes_given_up and not stats.unreachable:
            log.warning(
                "delivery to %s:%s gave up %d write(s)",
                self._channel.name,
                self._writer.chat_id,
                stats.writes_given_up,
            )
        return stats

    async def _loop(self) -> None:
        while True:
            wrote, deadline = await self._step()
            if wrote:
                continue  # poll again at once, with anything fed meanwhile
            if self.engine.finished and not self._inbox:
                return
            self._notify()
            if self._inbox:
                continue
            wakeup = self._wakeup = asyncio.Event()
            self._quiet = self.engine.quiet_until if self._text_waits else -math.inf
            if deadline is None:
                self._wait_until = math.inf
            else:
                self._wait_until = deadline
                self._wake_in(deadline - self._clock(), wakeup)
            self._waiting = True
            self._told = False
            try:
                await wakeup.wait()
            finally:
                self._waiting = False
                self._told = False
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None

    def _wake_in(self, delay: float, wakeup: asyncio.Event) -> None:
        """End the current wait ``delay`` seconds from now (replacing an earlier end): a timer
        of the loop that sets the event, where a cancel scope's deadline would throw a
        cancellation into the task and catch it, about three times the cost per write."""
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        at = loop.time() + max(0.0, delay)
        self._timer = loop.call_at(at, self._due, loop, wakeup, at)

    def _due(self, loop: asyncio.AbstractEventLoop, wakeup: asyncio.Event, at: float) -> None:
        # The loop runs a timer up to its clock's resolution early: the wait ends only once its
        # time has come, as a cancel scope's deadline does (or the engine, asked a hair early,
        # would ask to sleep until the same time again, at once, for good under virtual time).
        if loop.time() < at:
            self._timer = loop.call_at(at, self._due, loop, wakeup, at)
        else:
            wakeup.set()

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    async def _step(self) -> tuple[bool, float | None]:
        """Apply queued events, poll, execute. Returns whether a write was done and the
        engine's wake-up deadline (``None``: none, wait for the next event)."""
        self.pull()
        now = self._clock()
        while self._inbox:
            event = self._inbox.popleft()
            try:
                self.engine.receive(event, now)
            except DeliveryProtocolError as exc:
                log.warning("delivery to %s:%s: %s", self._channel.name, self.chat_id, exc)
        actions: deque[Action] = deque(self.engine.poll(now))
        deadline: float | None = None
        wrote = False
        while actions:
            action = actions.popleft()
            match action:
                case SleepUntil(deadline=at):
                    deadline = at
                case SendTyping():
                    if not await self._writer.typing():
                        self.engine.destination_gone()
                case GuardPiece():
                    if self._policy.has_hook and self._hooks is not None:
                        self._hooks.start_soon(as_task, partial(self._guard, action))
                    else:  # only redaction: no worker, no wait
                        self.engine.receive(await self._verdict(action), self._clock())
                        wrote = True
                case SendMessage() | EditMessage() | DeleteMessage():
                    self._writing = True
                    try:
                        outcome = await self._writer.write(action)
                    finally:
                        self._writing = False
                    self.engine.receive(outcome, self._clock())
                    wrote = True
        return wrote, deadline

    async def _verdict(self, piece: GuardPiece) -> DeliveryEvent:
        return await guard_piece(self._policy, piece, where=f"{self._channel.name}:{self.chat_id}")

    async def _guard(self, piece: GuardPiece) -> None:
        self.feed(await self._verdict(piece))
