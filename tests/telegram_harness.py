"""End-to-end harness for Telegram: the real daemon against the local Bot API peer and a local
provider server, both on 127.0.0.1 (architecture §3, §8).

:func:`running_bot` starts a :class:`~tests.peers.telegram.TelegramBotApiServer` and a
:class:`~tests.peers.provider_server.ProviderServer`, loads a YAML config pointing the ``tg``
channel at the peer and the ``main`` ``openai_chat`` provider at the provider server, and runs
:meth:`Daemon.run <orchestrator.ops.daemon.Daemon.run>` in a task group as ``relaybot run`` does
(channel start, long polling, dispatch, turn loop, delivery). The channel is the real adapter
with short HTTP timeouts (``FAST``) that also counts finished replies. Leaving the block stops
the daemon and checks it exited 0.

:func:`assert_chat_invariants` holds what every reply must keep (architecture §3): no identical
consecutive edit of one message (a retry of an edit that timed out excepted), writes to one chat
(send, edit, delete; not ``sendChatAction``) at least ``draft_update_interval_ms`` apart,
start to start, and no write refused unless the test scheduled that refusal.

Times are real (real sockets): tests keep the intervals short.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio

from channels.base import InboundHandler, utf16_len
from channels.telegram.adapter import TelegramChannel, TelegramTimeouts
from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from tests.channel_harness import (
    PATH,
    SPACING_TOLERANCE_SECS,
    CountsReplies,
    daemon_config,
    daemon_running,
    observing,
)
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.telegram import ApiError, Call, TelegramBotApiServer
from tests.peers.telegram_wire import NOT_MODIFIED
from tests.pipeline import sse

__all__ = [
    "CHAT",
    "FAST",
    "SPACING_TOLERANCE_SECS",
    "Bot",
    "ObservedTelegramChannel",
    "assert_chat_invariants",
    "assert_split_exactly",
    "content_chunk",
    "fast_channels",
    "pieces_of",
    "reply",
    "running_bot",
    "serving",
    "slow_hook",
    "text_stream",
    "tool_call_stream",
    "words",
]

CHAT = 111
FAST = TelegramTimeouts(connect_secs=2, read_secs=1, write_secs=2, pool_secs=1, long_poll_secs=1)
"""Short HTTP bounds, in seconds: a write not answered within 1 s times out."""

_WRITES = frozenset({"sendmessage", "editmessagetext", "deletemessage"})


def content_chunk(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _finish(reason: str) -> list[Any]:
    return [
        {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]},
        {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5}},
        "[DONE]",
    ]


def text_stream(deltas: Sequence[str]) -> tuple[bytes, list[int]]:
    """A Chat Completions stream of ``deltas``, finish ``stop``, ``[DONE]``; and the byte
    offsets after each delta's event (cut there to deliver one delta per read)."""
    return _stream([content_chunk(d) for d in deltas if d], "stop")


def tool_call_stream(
    deltas: Sequence[str], *, timezone: str = "UTC", call_id: str = "call_1"
) -> tuple[bytes, list[int]]:
    """``deltas`` of narration, then one ``current_time`` call, finish ``tool_calls``."""
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "current_time", "arguments": json.dumps({"timezone": timezone})},
    }
    events = [content_chunk(d) for d in deltas if d]
    events.append({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    return _stream(events, "tool_calls")


def _stream(events: list[dict[str, Any]], finish: str) -> tuple[bytes, list[int]]:
    cuts, body = [], b""
    for event in events:
        body += sse(event)
        cuts.append(len(body))
    return body + sse(*_finish(finish)), cuts


def reply(stream: tuple[bytes, list[int]], *, delay_secs: float = 0.0, **kwargs: Any) -> Reply:
    """A provider reply delivering each delta on its own, ``delay_secs`` apart."""
    body, cuts = stream
    return Reply(body=body, cuts=cuts, delay_secs=delay_secs, **kwargs)


@dataclass
class Bot:
    """A running daemon with its peers."""

    peer: TelegramBotApiServer
    provider: ProviderServer
    daemon: Daemon
    interval_ms: int
    mode: str
    multi_message_delay_ms: int
    injected: list[ApiError] = field(default_factory=list)

    def fail(self, method: str, *, call: int, error: ApiError) -> None:
        """Schedule a refusal in the peer (the invariants then accept it)."""
        self.injected.append(error)
        self.peer.fail(method, call=call, error=error)

    def writes(self) -> list[Call]:
        return [c for c in self.peer.calls if c.chat_id == CHAT and c.method.lower() in _WRITES]

    @property
    def channel(self) -> ObservedTelegramChannel:
        channel = self.daemon.channels["tg"]
        assert isinstance(channel, ObservedTelegramChannel)
        return channel

    async def ask(self, text: str, *, within: float = 20.0) -> None:
        """A user sends ``text``; returns once the daemon reports its reply fully delivered."""
        before = self.channel.replies_finished
        self.peer.inject_message(CHAT, text)
        with anyio.fail_after(within):
            await self.channel.wait_replies(before + 1)

    def check(self) -> None:
        assert_chat_invariants(
            self.peer,
            CHAT,
            self.interval_ms,
            send_delay_ms=self.multi_message_delay_ms if self.mode == "multi_message" else None,
            injected=self.injected,
        )


def _config_text(
    peer: TelegramBotApiServer,
    provider: ProviderServer,
    tmp_path: Path,
    *,
    mode: str,
    interval_ms: int,
    multi_message_delay_ms: int,
    hook: str | None = None,
    hook_timeout_secs: float | None = None,
    max_retries: int | None = None,
) -> str:
    policy = f'policy:\n  on_message_sending: "{hook}"\n' if hook else ""
    if hook and hook_timeout_secs is not None:
        policy += f"  hook_timeout_secs: {hook_timeout_secs}\n"
    channel = f"""\
  tg:
    kind: telegram
    token: "{peer.token}"
    base_url: "{peer.base_url}"
    stream_mode: {mode}
    draft_update_interval_ms: {interval_ms}
    multi_message_delay_ms: {multi_message_delay_ms}
    allowed_users: ["*"]
"""
    retries = f"    max_retries: {max_retries}\n" if max_retries is not None else ""
    return daemon_config(provider.url, tmp_path, channel, policy=policy, provider=retries)


class ObservedTelegramChannel(CountsReplies, TelegramChannel):
    """The Telegram adapter with short timeouts (:data:`FAST`), counting finished replies."""

    def __init__(self, name: str, config: Any, on_inbound: InboundHandler) -> None:
        super().__init__(name, config, on_inbound, timeouts=FAST)


fast_channels = observing("telegram", ObservedTelegramChannel)
"""The daemon's ``channel_factory``: :class:`ObservedTelegramChannel` for ``kind: telegram``."""


SLOW_HOOK_SECS = 0.4


def slow_hook(channel: str, chat_id: str, text: str) -> str:
    """An ``on_message_sending`` hook that takes :data:`SLOW_HOOK_SECS` (as one calling a
    service synchronously would) and keeps the text."""
    time.sleep(SLOW_HOOK_SECS)
    return text


@asynccontextmanager
async def running_bot(
    tmp_path: Path,
    replies: Sequence[Reply],
    *,
    mode: str = "partial",
    interval_ms: int = 150,
    multi_message_delay_ms: int = 300,
    hook: str | None = None,
    hook_timeout_secs: float | None = None,
    max_retries: int | None = None,
) -> AsyncIterator[Bot]:
    """The daemon serving the ``tg`` channel, its provider scripted with ``replies``;
    ``hook`` is ``policy.on_message_sending`` (an import path), ``hook_timeout_secs`` its
    bound, ``max_retries`` the provider's (its default when ``None``)."""
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(CHAT)
        provider.script(PATH, list(replies))
        text = _config_text(
            peer,
            provider,
            tmp_path,
            mode=mode,
            interval_ms=interval_ms,
            multi_message_delay_ms=multi_message_delay_ms,
            hook=hook,
            hook_timeout_secs=hook_timeout_secs,
            max_retries=max_retries,
        )
        config = load_config_text(text, source_name="e2e.yaml", environ={})
        storage = tmp_path / "relaybot.db"
        daemon = Daemon(config, storage_path=storage, channel_factory=fast_channels)
        async with serving(daemon, peer):
            yield Bot(peer, provider, daemon, interval_ms, mode, multi_message_delay_ms)


@asynccontextmanager
async def serving(daemon: Daemon, peer: TelegramBotApiServer) -> AsyncIterator[None]:
    """Run ``daemon`` until the block ends (it has polled once when the block starts), then stop
    it as SIGTERM does, also when the test failed; it must exit 0."""

    async def polled() -> bool:
        return bool(peer.calls_to("getUpdates"))

    async with daemon_running(daemon, polled):
        yield


# -- texts ----------------------------------------------------------------------------------


def pieces_of(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (the last one shorter)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def words(prefix: str, length: int) -> str:
    """Words ``<prefix><n>`` separated by spaces, at least ``length`` characters."""
    out, n = "", 0
    while len(out) < length:
        out += f"{prefix}{n} "
        n += 1
    return out.rstrip()


def assert_split_exactly(texts: list[str], text: str) -> None:
    """``texts`` are ``text`` cut into valid messages: each within 4096 UTF-16 units, and
    together the text exactly, but for whitespace at the ends of a message (which Telegram
    trims, and the formatted final text does not keep)."""
    assert len(texts) >= 2
    assert all(0 < utf16_len(t) <= 4096 for t in texts)
    position = 0
    for index, message in enumerate(texts):
        body = message.strip()
        skipped = len(text) - position - len(text[position:].lstrip())
        position += skipped
        assert text.startswith(body, position), f"message {index + 1} does not continue the text"
        position += len(body)
    assert not text[position:].strip()


# -- invariants ---------------------------------------------------------------------------


def _content(call: Call) -> tuple[Any, ...]:
    """What a write asks the message to show: text and markup, as sent."""
    params = call.params
    return params.get("text"), params.get("entities") or None, params.get("parse_mode")


def assert_chat_invariants(
    peer: TelegramBotApiServer,
    chat_id: int,
    interval_ms: int,
    *,
    send_delay_ms: int | None = None,
    injected: Sequence[ApiError] = (),
) -> None:
    """architecture §3 in one chat, from the peer's record of every request.

    * No edit asks a message to show what it already shows (the peer's "message is not
      modified"), unless the previous edit of that message timed out on the client's side
      (the peer saw the client go away): its outcome was unknown, so the retry is no
      identical edit.
    * Consecutive writes (sendMessage, editMessageText, deleteMessage) start at least
      ``interval_ms`` apart (within :data:`SPACING_TOLERANCE_SECS`); with ``send_delay_ms``,
      consecutive sends at least that far apart too.
    * Every write was accepted, timed out, or refused with an error the test scheduled.
    """
    writes = [c for c in peer.calls if c.chat_id == chat_id and c.method.lower() in _WRITES]
    interval = interval_ms / 1000 - SPACING_TOLERANCE_SECS
    for earlier, later in pairwise(writes):
        gap = later.at - earlier.at
        assert gap >= interval, (
            f"{later.method} started {gap * 1000:.0f} ms after {earlier.method} "
            f"(interval {interval_ms} ms)"
        )
    if send_delay_ms is not None:
        sends = [c for c in writes if c.method.lower() == "sendmessage"]
        for earlier, later in pairwise(sends):
            gap = later.at - earlier.at
            assert gap >= send_delay_ms / 1000 - SPACING_TOLERANCE_SECS, (
                f"sends {gap * 1000:.0f} ms apart (multi_message_delay_ms {send_delay_ms})"
            )
    scheduled = [e.description for e in injected]
    shown: dict[int, tuple[Any, ...] | None] = {}
    for call in writes:
        method = call.method.lower()
        message_id = call.params.get("message_id")
        retry = method == "editmessagetext" and message_id in shown and shown[message_id] is None
        if method == "editmessagetext" and not retry:
            assert _content(call) != shown.get(message_id), (
                f"identical consecutive edit of message {message_id}: {call.params['text']!r}"
            )
        if call.error is not None and not (retry and call.error == NOT_MODIFIED.description):
            assert call.error in scheduled, f"{method} refused: {call.error}"
            scheduled.remove(call.error)
        if method == "sendmessage" and call.status == 200:
            shown[call.result["message_id"]] = _content(call)
        elif method == "editmessagetext" and call.abandoned:
            shown[message_id] = None  # it may or may not have landed
        elif method == "editmessagetext" and (
            call.status == 200 or call.error == NOT_MODIFIED.description
        ):
            shown[message_id] = _content(call)  # applied, or a retry found it shown
