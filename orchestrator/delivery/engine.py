"""The delivery engine: sans-I/O, like h11's ``Connection`` (architecture §3, §4).

Theory of operation
-------------------
One engine delivers one reply to one chat. The caller feeds it events (what the policy released,
tool status, round boundaries, how the answer ended, and the outcome of each write) together with
the current monotonic time in seconds, and gets back actions to carry out. The engine never
awaits, never sleeps and never reads a clock.

At most one write (send, edit, delete) is in flight: after :meth:`DeliveryEngine.poll` or
:meth:`DeliveryEngine.handle` returns one, the caller executes it (exactly one platform write)
and feeds back :class:`WriteSucceeded` or :class:`WriteFailed` before the engine writes again.
``SendTyping`` needs no answer. Where a piece needs the ``on_message_sending`` hook's verdict
(each piece in ``multi_message``, the text in ``off``, the final text in ``partial``) the engine
returns ``GuardPiece(piece_id, text)`` — at most one outstanding, never waiting for a write — and
the caller runs the hook off the event loop and feeds back ``PieceGuarded(piece_id, text)`` or
``PieceWithheld(piece_id)``; a verdict for a piece not awaited is ignored. The engine never
calls user code; it measures formatted text with the channel's pure renderer (in the settings).
When the engine is waiting for time to pass, the last action is
``SleepUntil(deadline)``: poll again at ``deadline`` or when a new event arrives. An empty list
means: nothing to do until the next event.

Everything the engine knows of the reply — the write in flight, the verdict awaited, whether the
answer is over, every time that spaces the writes and the mode's planner's state — is one immutable
:class:`~orchestrator.delivery.reply_state.ReplyState`; each event's effect on it is a pure function
looked up in one table (:data:`~orchestrator.delivery.reply_state.TRANSITIONS`), which also says
whether the planner hears the event; the planner's effect is a pure function in its own table
(:data:`~orchestrator.delivery.drafts.TRANSITIONS` in ``partial``,
:data:`~orchestrator.delivery.pieces.TRANSITIONS` in ``off`` and ``multi_message``). The engine
keeps the current value (and the transcript of the text), applies the steps and stores the new
value.

What to write is decided by the mode's planner, from the current state only (latest text wins;
intermediate states are never queued): :mod:`~orchestrator.delivery.drafts` (``partial``) and
:mod:`~orchestrator.delivery.pieces` (``off``, ``multi_message``); their module
docstrings describe the layouts. The engine owns time:

- *Spacing*: a write starts no earlier than ``draft_update_interval_ms`` after the previous
  write *completed* (its outcome was fed back), so start-to-start is at least the interval too,
  however long the caller took between our decision and its request (a slow
  ``on_message_sending`` hook runs in between). In ``multi_message`` a send also waits
  ``multi_message_delay_ms`` after the previous send completed.
- *Flood control*: ``WriteFailed("rate_limited", retry_after)`` fed at ``now`` blocks every
  write and the typing indicator until ``now + retry_after``; then the planner's newest state is
  written (interim states were never queued; the final text is never dropped).
- *Back-off*: a write refused outright (``WriteFailed("refused")``) is retried no earlier than
  the back-off its planner asks for (``REFUSED_BACKOFF_SECS``); other writes wait too.
- *Typing*: while the answer is not over, ``SendTyping`` at the first poll and then whenever
  ``typing_interval_ms`` passed since both the last typing and the last write.

Event table (``handle(event, now)``)::

    event                while the answer runs                        after it ended
    -------------------  -------------------------------------------  ----------------------
    TextEmitted(t)       append t (a new round's first text comes      DeliveryProtocolError
                         after a blank line); the status line goes
    ToolStarted(c, s)    s is call c's line under the round's lines    DeliveryProtocolError
                         (partial), its own message (multi_message +
                         show_tool_status), else typing only
    ToolFinished(c, s)   s replaces c's line where it still shows: in  DeliveryProtocolError
                         the draft at its next edit (partial); its
                         message is edited, or sent so if not yet sent
                         (multi_message + show_tool_status)
    RoundEnded           flush the turn (multi_message); the next      DeliveryProtocolError
                         text opens a new round
    Restarted            drop the round's text and held pieces         DeliveryProtocolError
    AnswerEnded          the hook's verdict per piece, final layout    DeliveryProtocolError
    AnswerInterrupted(c) same, then "⚠️ Answer interrupted: c"         DeliveryProtocolError
    AnswerRefused(n)     the notice n replaces what was shown          DeliveryProtocolError
    WriteSucceeded(id)   the write in flight landed                    same
    WriteFailed(r, ra)   rate_limited: wait ra s (above);              same
                         not_modified on an edit: success;
                         refused: planner, after its back-off;
                         timeout/gone/too_long/failed/moved: planner;
                         unreachable: no more writes (nor typing)
    PieceGuarded(i, t)   the verdict on piece i (t None: cancelled)    same
    PieceWithheld(i)     the hook failed on piece i: withheld notice   same
    WrittenElsewhere(s)  the next write is spaced from now (an         same
                         approval prompt; s: it was a send)
    (WriteSucceeded/WriteFailed with nothing in flight: DeliveryProtocolError)

The engine is :attr:`~DeliveryEngine.finished` once the answer is over, nothing is in flight or
awaited and the planner has nothing left to write. Queries (:attr:`~DeliveryEngine.pending`,
:attr:`~DeliveryEngine.finished`, the planner's ``next_kind``) never change state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from orchestrator.delivery import draft_layout, draft_scan, drafts, pieces
from orchestrator.delivery.draft_state import Drafts, new_drafts
from orchestrator.delivery.events import (
    Action,
    AnswerEnded,
    AnswerInterrupted,
    AnswerRefused,
    DeliveryEvent,
    GuardPiece,
    PieceGuarded,
    PieceWithheld,
    Restarted,
    RoundEnded,
    SendTyping,
    SleepUntil,
    TextEmitted,
    ToolFinished,
    ToolStarted,
    WriteFailed,
    WriteSucceeded,
)
from orchestrator.delivery.planning import (
    RESTARTED_NOTICE,
    DeliveryStats,
    Ending,
    Transcript,
    Write,
    WriteKind,
    as_stats,
    interrupted_marker,
)
from orchestrator.delivery.queue_state import new_queue
from orchestrator.delivery.reply_state import (
    DeliveryProtocolError,
    ReplyState,
    backed_off,
    gone,
    guarding,
    started,
    transition,
    typed,
    typing_at,
    with_counts,
    with_drafts,
    with_queue,
    write_at,
)
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import measure

__all__ = ["DeliveryEngine", "DeliveryProtocolError", "DeliveryStats"]


def _as_is(text: str) -> str:
    return text


class DeliveryEngine:
    """Decides every write of one reply to one chat (see the module docstring).

    Args:
        settings: the channel's delivery settings (its renderer included).
        redact_line: redacts the markers and notices the engine composes (the policy's
            ``redact_line``; a pure function).
    """

    def __init__(
        self, settings: DeliverySettings, redact_line: Callable[[str], str] = _as_is
    ) -> None:
        self._settings = settings
        self._redact_line = redact_line
        partial = settings.mode == "partial"
        self._streams = settings.mode == "multi_message"
        """Pieces are cut as the text comes (else ``off`` reads the text only at the end)."""
        self._transcript = Transcript(
            functools.partial(measure, settings.limits) if partial or self._streams else None,
            visible=partial,
        )
        """The reply's visible text (appended per delta; the state holds offsets into it)."""
        if partial:
            first = ReplyState(drafts=new_drafts(settings))
        else:
            first = ReplyState(queue=new_queue(settings, redact_line(RESTARTED_NOTICE)))
        self._state = first
        """Everything this reply's delivery knows (:mod:`~orchestrator.delivery.reply_state`)."""

    # -- state ----------------------------------------------------------------------------

    @property
    def settings(self) -> DeliverySettings:
        return self._settings

    @property
    def text(self) -> str:
        """The reply's visible text so far (all rounds, separators included)."""
        return self._transcript.text

    @property
    def answer_over(self) -> bool:
        """The answer ended, was interrupted or refused: no more input events are accepted."""
        return self._state.over

    @property
    def unreachable(self) -> bool:
        """A write found the chat or thread gone: nothing more of the reply is written."""
        return self._state.unreachable

    @property
    def write_in_flight(self) -> bool:
        return self._state.in_flight is not None

    @property
    def pending(self) -> bool:
        """A write is in flight or waiting for its time, or a verdict is awaited (typing not
        counted). Changes nothing."""
        state = self._state
        if state.unreachable:
            return False
        return (
            state.in_flight is not None
            or state.guarding is not None
            or self._guard_request() is not None
            or self._next_kind() is not None
        )

    @property
    def quiet_until(self) -> float:
        """Monotonic time (seconds) before which no write can start, whatever is fed next: the
        spacing after the last write, a rate limit or a back-off. ``-inf`` when a write may
        start at once (nothing written yet). Changes nothing."""
        return self._write_at("edit")

    @property
    def finished(self) -> bool:
        """The answer is over and everything has been written."""
        return self._state.over and not self.pending

    @property
    def writes_sent(self) -> int:
        return as_stats(self._state.counts).writes_sent

    @property
    def messages_created(self) -> int:
        return as_stats(self._state.counts).messages_created

    @property
    def stats(self) -> DeliveryStats:
        return as_stats(self._state.counts)

    # -- input ----------------------------------------------------------------------------

    def handle(self, event: DeliveryEvent, now: float) -> list[Action]:
        """Feed one event at monotonic time ``now`` (seconds); returns what to do next.

        Raises:
            DeliveryProtocolError: see the event table.
        """
        self.receive(event, now)
        return self.poll(now)

    def receive(self, event: DeliveryEvent, now: float) -> None:
        """Apply one event without planning; follow a batch of these with :meth:`poll` (so a
        burst of text yields one write with the newest text).

        Raises:
            DeliveryProtocolError: see the event table.
        """
        if type(event) is TextEmitted and not self._state.over:
            # Nearly every event: its transition leaves the state as it is and the planner
            # hears it (reply_state.TRANSITIONS), taken here without building the step.
            appended = self._transcript.append(event.text)
            if not appended:
                return
            state = self._state
            if state.drafts is None:
                queue = state.queue
                assert queue is not None
                if self._streams:
                    cut = pieces.on_text(queue, appended, self._transcript, self._settings)
                    if cut is not queue:  # else nothing completed: no record changes
                        self._state = with_queue(state, cut)
                        self._transcript.settle(cut.cursor)
                return
            grown = drafts.on_text(state.drafts, appended, self._transcript, self._settings)
            if grown is not state.drafts:  # else the live draft grew within its room
                self._state = with_drafts(state, grown)
                if grown.layout.cuts is not state.drafts.layout.cuts:
                    self._settle(grown)
            return
        step = transition(self._state, event, now, self._settings)
        self._state = step.state
        self._count(step.count)
        if step.tell:
            self._tell(event, now)

    def _tell(self, event: DeliveryEvent, now: float) -> None:
        """The planner (and the transcript) hear ``event``: its transition said so."""
        heard: drafts.DraftInput
        match event:
            case TextEmitted(text=text):
                appended = self._transcript.append(text)
                if not appended:
                    return
                heard = event if appended is text else TextEmitted(appended)
            case RoundEnded():
                self._transcript.end_round()
                heard = event
            case Restarted():
                self._transcript.restart()
                heard = event
            case AnswerEnded():
                heard = Ending("ended")
            case AnswerInterrupted(cause=cause, marker=marker):
                line = interrupted_marker(cause) if marker is None else marker
                heard = Ending("interrupted", self._redact_line(line))
            case AnswerRefused(notice=notice):
                heard = Ending("refused", self._redact_line(notice))
            case (
                ToolStarted()
                | ToolFinished()
                | PieceGuarded()
                | PieceWithheld()
                | WriteSucceeded()
                | WriteFailed()
            ):
                heard = event
            case _:
                return
        state = self._state
        if state.queue is not None:
            told = pieces.hear(state.queue, heard, self._transcript, self._settings)
            self._state = with_queue(state, told.queue)
            self._count(told.count)
            self._transcript.settle(told.queue.cursor)
            backoff = told.backoff
        else:
            assert state.drafts is not None
            step = drafts.hear(state.drafts, heard, self._transcript, self._settings)
            self._state = with_drafts(state, step.drafts)
            self._count(step.count)
            self._settle(step.drafts)
            backoff = step.backoff
        if isinstance(heard, WriteFailed) and heard.reason != "rate_limited":
            self._state = backed_off(self._state, now, backoff)

    def _count(self, names: tuple[str, ...]) -> None:
        if names:
            self._state = with_counts(self._state, names)

    def _settle(self, state: Drafts) -> None:
        """The text before the live draft's start is no longer read per delta (the layout's
        start moved: a freeze, a restart, a message laid out again)."""
        self._transcript.rebase(draft_layout.start(state.layout))

    # -- the planner ------------------------------------------------------------------------

    def _guard_request(self) -> GuardPiece | None:
        """The verdict the planner needs now (a query)."""
        state = self._state
        if state.queue is not None:
            return pieces.guard_request(state.queue)
        assert state.drafts is not None
        return state.drafts.guard

    def _ask_verdict(self, request: GuardPiece) -> None:
        """``request`` (the verdict the planner needs now) asked for (a command): it is then
        awaited."""
        state = self._state
        if state.queue is not None:
            state = with_queue(state, pieces.guard_started(state.queue, request.piece_id))
        else:
            assert state.drafts is not None
            state = with_drafts(state, drafts.guard_started(state.drafts))
        self._state = guarding(state, request.piece_id)

    def _next_kind(self) -> WriteKind | None:
        """The kind of the planner's next write (a query)."""
        state = self._state
        if state.queue is not None:
            return pieces.next_kind(state.queue)
        assert state.drafts is not None
        return draft_scan.next_kind(state.drafts, self._transcript, self._settings)

    def destination_gone(self) -> None:
        """The chat or thread is gone, found by something other than a write (the typing
        indicator): as ``WriteFailed("unreachable")``, nothing more is written."""
        if not self._state.unreachable:
            self._state = gone(self._state)

    # -- output ---------------------------------------------------------------------------

    def poll(self, now: float) -> list[Action]:
        """What to do at monotonic time ``now`` (seconds): a ``GuardPiece`` when a verdict is
        needed, at most one write, possibly ``SendTyping``, and ``SleepUntil`` last when waiting
        for time to pass."""
        actions: list[Action] = []
        state = self._state
        if state.unreachable:
            return actions
        # The planner's queries, inline (_guard_request, _next_kind): every delta polls.
        planned, queue = state.drafts, state.queue
        if state.guarding is None:
            if planned is not None:
                request = planned.guard
            else:
                assert queue is not None
                request = pieces.guard_request(queue)
            if request is not None:
                self._ask_verdict(request)
                actions.append(request)
                state = self._state
                planned, queue = state.drafts, state.queue
        if state.in_flight is not None:
            return actions
        wake: float | None = None
        if planned is not None:
            kind = draft_scan.next_kind(planned, self._transcript, self._settings)
        else:
            assert queue is not None
            kind = pieces.next_kind(queue)
        if kind is not None:
            start_at = write_at(state, kind, self._settings)
            if now < start_at:
                wake = start_at
            else:
                # One plan: it may find nothing to change after all (a live draft changed back
                # to what it shows); it records that, and looks on to the end itself.
                write = self._plan()
                if write is not None:
                    self._start(write)
                    actions.append(write.action)
                    return actions
        if not state.over:
            typing_due = typing_at(state, now, self._settings)
            if now >= typing_due:
                actions.append(SendTyping())
                self._state = state = typed(state, now)
                typing_due = typing_at(state, now, self._settings)
            if wake is None or typing_due < wake:
                wake = typing_due
        if wake is not None:
            actions.append(SleepUntil(wake))
        return actions

    def _plan(self) -> Write | None:
        """The planner's next write, started (a command)."""
        state = self._state
        if state.queue is not None:
            queue, write = pieces.plan(state.queue, self._settings)
            self._state = with_queue(state, queue)
            return write
        assert state.drafts is not None
        planned = draft_scan.plan(state.drafts, self._transcript, self._settings)
        self._state = with_drafts(state, planned.drafts)
        self._count(planned.count)
        return planned.write

    def next_write_at(self) -> float:
        """The earliest monotonic time (seconds) a send to the chat may start: the spacing from
        the last write (and send), a flood wait, a back-off. A query: it changes nothing (a
        write not made by the engine, such as an approval prompt, waits for it, architecture
        §3 "Spacing")."""
        return self._write_at("send")

    def _write_at(self, kind: WriteKind) -> float:
        return write_at(self._state, kind, self._settings)

    def _start(self, write: Write) -> None:
        self._state = started(self._state, write)
