"""Where one model round's stream events go (architecture §5): visible text through the reply's
outbound policy into delivery, tool status of provider-run tools, nothing of the reasoning."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import Restarted, TextEmitted, ToolFinished, ToolStarted
from orchestrator.delivery.hooks import PiecePolicy
from orchestrator.think import ThinkFilter
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

    ``attempts`` counts the attempts seen so far (1 + restarts), for a round cut short."""

    def __init__(self, policy: ReplyPolicyLike, driver: DeliveryDriver) -> None:
        self._policy = policy
        self._driver = driver
        self._think = ThinkFilter()
        self.visible: list[str] = []
        self.attempts = 1

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
        """The round's visible text (what the filter held is released first)."""
        self._forward(self._think.flush()[0])
        return "".join(self.visible)

    def restart(self) -> None:
        self._think = ThinkFilter()
        self.visible.clear()
        self.attempts += 1
        self._policy.restart()
        self._driver.feed(Restarted())
