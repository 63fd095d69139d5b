"""Channels for the benchmarks: a no-op channel and one recording what the scale bench needs.

Both are real :class:`channels.base.Channel` subclasses in ``partial`` mode (a Telegram-like
draft edited in place, 4096 UTF-16 units per message) whose writes do nothing on a network.
:class:`RecordingChannel` keeps, per chat, only what the figures need (a few floats, so it adds
little memory per conversation): the time of the first write, and for every write its *edit
lag*: how late it came compared with when it was due. A write is due at the later of (a) the
previous write to that chat plus the draft interval and (b) the moment the first text it adds
could have been shown: the server's send time of the delta whose arrival released that text
from the redaction window (:class:`StampingPolicies` records it; the deltas carry their send
times, :func:`bench.streams.last_stamp`). So the policy's holdback and the throttle, which
are by design, are not lag; a backlog anywhere (socket, decode, policy, delivery, loop) is.
"""

from __future__ import annotations

import itertools
import time
import weakref
from typing import Any, Literal

from bench.streams import last_stamp
from channels.base import Channel, ChannelLimits, InboundMessage, MessageRef
from channels.settings import StreamModeSettings
from orchestrator.policy import OutboundPolicy

__all__ = ["BenchChannelConfig", "NoopChannel", "RecordingChannel", "StampingPolicies"]


class BenchChannelConfig(StreamModeSettings):
    """A chat network's channel config (:class:`channels.settings.StreamModeSettings`, every
    key a channel reads at the start of a reply, as a Telegram config has them)."""

    kind: Literal["bench"] = "bench"
    draft_update_interval_ms: int = 1000  # 0 too: the pipeline bench times every write


async def _ignore(message: InboundMessage) -> None:
    return None


class NoopChannel(Channel):
    """Every write succeeds at once and is forgotten; counts the writes."""

    limits = ChannelLimits(4096, "utf16")

    def __init__(self, config: BenchChannelConfig | None = None) -> None:
        super().__init__("bench", config or BenchChannelConfig(), _ignore)
        self._ids = itertools.count(1)
        self.writes = 0

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        self.writes += 1
        self._on_write(chat_id, text)
        return MessageRef(chat_id, str(next(self._ids)))

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        self.writes += 1
        self._on_write(ref.chat_id, text)

    async def _delete_message(self, ref: MessageRef) -> None:
        self.writes += 1

    def _on_write(self, chat_id: str, text: str) -> None:
        return None


class RecordingChannel(NoopChannel):
    """A :class:`NoopChannel` that records first-write times and edit lags (seconds)."""

    def __init__(self, config: BenchChannelConfig | None = None) -> None:
        super().__init__(config)
        self.interval = self.draft_update_interval_ms / 1000
        self.first_write: dict[str, float] = {}
        self.lags: list[float] = []
        self.released: dict[str, float] = {}
        """Per chat: when the first text not yet written could have been shown."""
        self._last: dict[str, float] = {}

    def _on_write(self, chat_id: str, text: str) -> None:
        now = time.monotonic()
        self.first_write.setdefault(chat_id, now)
        due = max(self._last.get(chat_id, -1.0) + self.interval, self.released.pop(chat_id, now))
        self.lags.append(max(0.0, now - due))
        self._last[chat_id] = now


class StampingPolicies:
    """An :class:`OutboundPolicy` telling ``channel`` when each reply's text was released.

    Wraps ``feed``: when it emits text, the send time stamped in the delta just fed is the
    earliest the text could have been shown; ``finish`` (the end of the answer) counts as the
    last delta's. Only the first such time since the chat's last write is kept.
    """

    def __init__(self, policy: OutboundPolicy, channel: RecordingChannel) -> None:
        self._policy = policy
        self._channel = channel

    def new_reply(self, channel: str, chat_id: str, render: Any = None) -> Any:
        reply = self._policy.new_reply(channel, chat_id, render)
        released = self._channel.released
        # The wrappers live on the reply: they reach it weakly, or the reply and they would be
        # a reference cycle that `relaybot run`'s replies are not (a turn freed by the
        # collector, not when it ends, changes what the scale rows measure).
        this, feed, finish = weakref.ref(reply), type(reply).feed, type(reply).finish
        last = [time.monotonic()]

        def stamped_feed(text: str) -> str:
            emitted = feed(this(), text)
            stamp = last_stamp(text)
            if stamp is not None:
                last[0] = stamp
            if emitted and chat_id not in released:
                released[chat_id] = last[0]
            return emitted

        def stamped_finish() -> str:
            released.setdefault(chat_id, last[0])
            return finish(this())

        reply.feed = stamped_feed
        reply.finish = stamped_finish
        return reply
