"""Where one model round's stream events go (architecture §5): visible text through the reply's
outbound policy into delivery, tool status of provider-run tools, nothing of the reasoning.

A tool the provider ran itself (``PreExecutedToolCall``) shows its status line like our own
calls (architecture §3 "Tool status"); its ``PreExecutedToolResult`` finishes the earliest
running call of that name (else the earliest running one): ``✓ name 0.4 s``, timed from the
call's event to the result's, or ``✗ name: cause`` when the provider flagged an error.

Text flows one way: visible text is held here, before the policy, and the sink tells the driver
it holds some (``DeliveryDriver.text_ready``); the driver takes it — through the policy, joined —
when it asks (its source, :meth:`RoundSink._take`): before each pass of its loop, so while no
write could start the text waits and the policy runs once per write, not once per delta
(architecture §3 "Spacing"). The sink never feeds text to the driver itself; before a
provider-run tool's status line and at the round's end it has the driver take the text first
(``DeliveryDriver.pull``). A restart forgets the held text with the attempt.

Reads are paced by the delivery (architecture §5 "Read pacing"): the provider's stream awaits
:meth:`RoundSink.pause` before each read after a read's events were taken. While no write could
start before a later time (the chat's spacing after the last write or after the write in flight,
a rate limit), the next read waits until :data:`READ_AHEAD_SECS` before it, at most
:data:`READ_PACE_MAX_SECS`: the socket buffers what the model sends meanwhile and one read takes
it all, so a model streaming 50 deltas a second into a chat edited once a second costs a few
reads a second, not fifty wakeups of the whole read path. A write starts with the text read up
to a moment before it; nothing is lost or reordered (the bytes wait in the socket), the first
text is read at once (before the first write nothing waits), and a tool call or the end of the
stream is seen at most :data:`READ_PACE_MAX_SECS` later."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

import anyio

from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import Restarted, ToolFinished, ToolStarted
from orchestrator.delivery.hooks import PiecePolicy
from orchestrator.tools.tool_status import done_line, failed_line, running_line
from orchestrator.turn.think import ThinkFilter
from providers.events import PreExecutedToolCall, PreExecutedToolResult, StreamEvent, TextDelta

__all__ = [
    "READ_AHEAD_SECS",
    "READ_PACE_MAX_SECS",
    "ReplyPolicyFactory",
    "ReplyPolicyLike",
    "RoundSink",
]

READ_PACE_MAX_SECS = 0.25
"""The longest a paced read waits (seconds): how late a tool call, a provider-run tool's status
or the end of the stream may be seen while the chat's spacing holds the text anyway."""

READ_AHEAD_SECS = 0.05
"""A paced read ends this long (seconds) before a write could start, so the write takes the
text sent up to then."""


class ReplyPolicyLike(PiecePolicy, Protocol):
    """The reply's outbound policy: its stream side here, its piece side for delivery
    (:class:`~orchestrator.delivery.hooks.PiecePolicy`)."""

    refusal: str | None

    def begin_round(self) -> None: ...
    def restart(self) -> None: ...
    def feed(self, text: str) -> str: ...
    def bytes_before_output(self) -> int: ...
    def end_round(self) -> str: ...
    def finish(self) -> str: ...


class ReplyPolicyFactory(Protocol):
    def new_reply(
        self, channel: str, chat_id: str, render: Callable[[str], str] | None = None
    ) -> ReplyPolicyLike: ...


class RoundSink:
    """Routes one round's events: visible text through the window to delivery. Reasoning
    (``StreamChunk.reasoning`` and a leading ``<think>`` block) never reaches a chat: no channel
    shows it yet (``show_reasoning`` is accepted by the config and has no effect).

    ``attempts`` counts the attempts seen so far (1 + restarts), for a round cut short;
    ``call_numbers`` numbers the status lines (the turn's, shared with its own calls)."""

    def __init__(
        self,
        policy: ReplyPolicyLike,
        driver: DeliveryDriver,
        call_numbers: Iterator[int] | None = None,
    ) -> None:
        self._policy = policy
        self._driver = driver
        self._numbers = call_numbers if call_numbers is not None else itertools.count()
        self._running: list[tuple[int, str, float]] = []
        """Provider-run calls without a result yet: (number, name, when it began)."""
        self._think = ThinkFilter()
        self._held: list[str] = []
        """Visible text not yet through the policy: it came while no write could start."""
        self._held_bytes = 0
        """UTF-8 length of ``_held``."""
        self._quiet_bytes = 0
        """How many bytes the policy could take and still emit nothing, as of the driver's last
        take (:meth:`ReplyPolicyLike.bytes_before_output`): held text short of it does not wake
        the driver, whose pass would find nothing to write (before the first write, every read
        did: a dozen passes a reply for nothing)."""
        self.visible: list[str] = []
        self.attempts = 1
        driver.pull_from(self._take)

    def _forward(self, visible: str) -> None:
        if not visible:
            return
        self.visible.append(visible)
        self._held.append(visible)  # through the policy when the driver takes it
        self._held_bytes += len(visible) if visible.isascii() else len(visible.encode("utf-8"))
        if self._held_bytes >= self._quiet_bytes:
            self._driver.text_ready()

    def _take(self) -> str:
        """The driver's source: the held text through the policy, what it emits (``""``:
        nothing)."""
        if not self._held:
            return ""
        visible = "".join(self._held)
        self._held.clear()
        self._held_bytes = 0
        emitted = self._policy.feed(visible)
        self._quiet_bytes = self._policy.bytes_before_output()
        return emitted

    def pause(self) -> Awaitable[None] | None:
        """The wait before the next read while the text read so far could start no write
        anyway: until :data:`READ_AHEAD_SECS` before a write could start, at most
        :data:`READ_PACE_MAX_SECS`; ``None`` when a write could start now, so the read need not
        wait at all (see the module docstring)."""
        delay = min(self._driver.quiet_for() - READ_AHEAD_SECS, READ_PACE_MAX_SECS)
        # asyncio's own sleep (the delivery driver's loop is asyncio's): anyio's looks up the
        # running backend on every call, and this runs before every paced read.
        return asyncio.sleep(delay) if delay > 0.0 else None

    def event(self, event: StreamEvent) -> None:
        if type(event) is TextDelta:  # nearly every event: no pattern matching for it
            if event.chunk.delta:
                self._forward(self._think.feed(event.chunk.delta)[0])
            return
        match event:
            case PreExecutedToolCall(name=name):
                self._driver.pull()
                number = next(self._numbers)
                self._running.append((number, name, anyio.current_time()))
                status = self._policy.redact_line(running_line(name))
                self._driver.feed(ToolStarted(number, status))
            case PreExecutedToolResult(name=name, error=error):
                self._driver.pull()
                self._finish(name, error)
            case _:
                pass

    def _finish(self, name: str, error: str | None) -> None:
        running = self._running
        match = next((r for r in running if r[1] == name), running[0] if running else None)
        if match is None:
            return  # a result without its call: nothing shows it
        running.remove(match)
        number, called, began = match
        if error is None:
            line = done_line(called, anyio.current_time() - began)
        else:
            line = failed_line(called, error, self._policy.redact_line)
        self._driver.feed(ToolFinished(number, self._policy.redact_line(line)))

    def end(self, cause: str = "no result") -> str:
        """The round's visible text (what the filter held is released first). A provider-run
        call still without a result ends here (``✗ name: <cause>``)."""
        self._forward(self._think.flush()[0])
        self._driver.pull()
        self._end_running(cause)
        return "".join(self.visible)

    def _end_running(self, cause: str) -> None:
        for number, name, _ in self._running:
            line = self._policy.redact_line(failed_line(name, cause, self._policy.redact_line))
            self._driver.feed(ToolFinished(number, line))
        self._running.clear()

    def restart(self) -> None:
        self._end_running("interrupted")
        self._think = ThinkFilter()
        self._held.clear()  # the attempt's text: forgotten with it, never emitted
        self._held_bytes = self._quiet_bytes = 0  # the policy returns to an earlier state
        self.visible.clear()
        self.attempts += 1
        self._policy.restart()
        self._driver.feed(Restarted())
