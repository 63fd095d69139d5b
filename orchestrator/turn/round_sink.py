"""Where one model round's stream events go (architecture §5): visible text through the reply's
outbound policy into delivery, tool status of provider-run tools, nothing of the reasoning.

A tool the provider ran itself (``PreExecutedToolCall``) shows its status line like our own
calls (architecture §3 "Tool status"); its ``PreExecutedToolResult`` finishes the earliest
running call of that name (else the earliest running one): ``✓ name 0.4 s``, timed from the
call's event to the result's, or ``✗ name: cause`` when the provider flagged an error.

Visible text that comes while no write could start (``DeliveryDriver.text_waits``) is held
here, before the policy, and handed to it joined when the driver's loop next passes (the driver
calls the sink's source first), before a provider-run tool's status line, and at the round's end
(architecture §3 "Spacing"); a restart forgets it with the attempt."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Protocol

import anyio

from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import Restarted, TextEmitted, ToolFinished, ToolStarted
from orchestrator.delivery.hooks import PiecePolicy
from orchestrator.tools.tool_status import done_line, failed_line, running_line
from orchestrator.turn.think import ThinkFilter
from providers.events import PreExecutedToolCall, PreExecutedToolResult, StreamEvent, TextDelta

__all__ = ["ReplyPolicyFactory", "ReplyPolicyLike", "RoundSink"]


class ReplyPolicyLike(PiecePolicy, Protocol):
    """The reply's outbound policy: its stream side here, its piece side for delivery
    (:class:`~orchestrator.delivery.hooks.PiecePolicy`)."""

    refusal: str | None

    def begin_round(self) -> None: ...
    def restart(self) -> None: ...
    def feed(self, text: str) -> str: ...
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
        self.visible: list[str] = []
        self.attempts = 1
        driver.pull_from(self._release)

    def _forward(self, visible: str) -> None:
        if not visible:
            return
        self.visible.append(visible)
        if self._driver.text_waits():
            self._held.append(visible)  # through the policy once a write could start
            return
        self._release(visible)

    def _release(self, visible: str = "") -> None:
        """The held text and ``visible`` through the policy, what it emits to delivery."""
        if self._held:
            self._held.append(visible)
            visible = "".join(self._held)
            self._held.clear()
        if visible:
            emitted = self._policy.feed(visible)
            if emitted:
                self._driver.feed(TextEmitted(emitted))

    def event(self, event: StreamEvent) -> None:
        if type(event) is TextDelta:  # nearly every event: no pattern matching for it
            if event.chunk.delta:
                self._forward(self._think.feed(event.chunk.delta)[0])
            return
        match event:
            case PreExecutedToolCall(name=name):
                self._release()
                number = next(self._numbers)
                self._running.append((number, name, anyio.current_time()))
                status = self._policy.redact_line(running_line(name))
                self._driver.feed(ToolStarted(number, status))
            case PreExecutedToolResult(name=name, error=error):
                self._release()
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
        self._release()
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
        self.visible.clear()
        self.attempts += 1
        self._policy.restart()
        self._driver.feed(Restarted())
