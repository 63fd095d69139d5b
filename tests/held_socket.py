"""Helpers for tests/test_paced_socket.py: the routes a paced body travels, bodies of any size
built in linear time, a paced reader, and the bytes the kernel holds unread.

A *route* is how the body reaches the provider: ``"plain"`` (HTTP, read from aiohttp's own
reader, its socket held by ``BodyStream.held``), ``"tls"`` (the same over HTTPS), ``"gzip"``
(``Content-Encoding: gzip``, decoded by httpx on the same aiohttp connection, held the same
way) and ``"proxy"`` (through ``HTTP_PROXY``: httpx's own proxy transport, nothing held, the
socket is read only when asked); ``"gzip-proxy"`` combines two. :func:`routed` serves a
test's replies over one of them; :func:`reply` encodes a body for it (gzip flushed at every
cut, so each piece decodes as it arrives).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import ssl
import stat
import struct
import termios
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import trustme

from providers.base import ChatMessage, ChatRequest, PacedStream
from providers.events import Final, TextDelta
from providers.openai_chat import OpenAIChatProvider
from tests.peers.http_proxy import HttpProxy
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import provider_config

__all__ = [
    "PATH",
    "ROUTES",
    "answer",
    "event_ends",
    "paced_text",
    "plain_text",
    "port_of",
    "provider",
    "reply",
    "routed",
    "sleeping",
    "unfinished",
    "unread_bytes",
    "words",
]

PATH = "/v1/chat/completions"
ROUTES = ("plain", "tls", "gzip", "proxy")
_REQUEST = ChatRequest(messages=(ChatMessage("user", "hi"),))
_TAIL = (
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    b'data: {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5}}\n\n'
    b"data: [DONE]\n\n"
)

Pace = Callable[[], Awaitable[None] | None]


def words(count: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def event_ends(body: bytes) -> list[int]:
    """The offsets just after each ``\\n\\n``: one cut per SSE event."""
    return [i + 2 for i in range(len(body)) if body[i : i + 2] == b"\n\n"]


def unfinished(text: str) -> bytes:
    """A Chat Completions stream of ``text`` word by word, without a finish or ``[DONE]``.

    Joined once, so a body of megabytes takes milliseconds (``tests.pipeline.sse`` adds bytes
    to bytes, quadratic in the number of events: 40 000 events take 17 s of CPU, 300 000 about
    a quarter of an hour, spent before the test's first await, where no ``fail_after`` reaches).
    """
    pieces = text.split(" ")
    last = len(pieces) - 1
    return b"".join(
        b"data: %s\n\n"
        % json.dumps(
            {"choices": [{"index": 0, "delta": {"content": p + (" " if i < last else "")}}]}
        ).encode()
        for i, p in enumerate(pieces)
    )


def answer(text: str) -> bytes:
    """The bytes of ``tests.pipeline.text_answer(text)`` (finish ``stop``, usage, ``[DONE]``),
    built in linear time."""
    return unfinished(text) + _TAIL


def reply(route: str, body: bytes, cuts: Sequence[int] = (), **kwargs: Any) -> Reply:
    """``Reply(body, cuts, **kwargs)`` as ``route`` sends it: for ``"gzip"`` the body is
    compressed piece by piece, flushed at each cut (so what arrived decodes at once) and
    finished unless the reply aborts or stays open."""
    if "gzip" not in route:
        return Reply(body=body, cuts=cuts, **kwargs)
    packer = zlib.compressobj(wbits=31)
    sent, sent_cuts, start = b"", [], 0
    for cut in [*sorted(set(cuts)), len(body)]:
        sent += packer.compress(body[start:cut]) + packer.flush(zlib.Z_SYNC_FLUSH)
        sent_cuts.append(len(sent))
        start = cut
    if not kwargs.get("abort") and not kwargs.get("hold_open"):
        sent += packer.flush()
    headers = {"Content-Encoding": "gzip", **kwargs.pop("headers", {})}
    return Reply(body=sent, cuts=sent_cuts[:-1], headers=headers, **kwargs)


@asynccontextmanager
async def routed(
    route: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[ProviderServer]:
    """A :class:`ProviderServer` the providers made inside reach by ``route``; for ``"proxy"``
    it checks on exit that the requests went through the proxy."""
    if "tls" in route:
        authority = trustme.CA()
        pem = tmp_path / "ca.pem"
        authority.cert_pem.write_to_path(str(pem))
        monkeypatch.setenv("SSL_CERT_FILE", str(pem))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        authority.issue_cert("127.0.0.1").configure_cert(context)
        async with ProviderServer(tls=context) as server:
            yield server
    elif "proxy" in route:
        async with ProviderServer() as server, HttpProxy() as proxy:
            monkeypatch.setenv("HTTP_PROXY", proxy.url)
            yield server
        assert proxy.targets, "the requests did not go through the proxy"
    else:
        async with ProviderServer() as server:
            yield server


def provider(server: ProviderServer, **overrides: Any) -> OpenAIChatProvider:
    """A Chat Completions provider of ``server``: headers bound 5 s, byte-idle bound 30 s, far
    below the 120 s / 300 s defaults, so a test waiting on either fails in seconds."""
    values: dict[str, Any] = {"timeout_secs": 5, "stream_idle_timeout_secs": 30}
    values.update(overrides)
    return OpenAIChatProvider("p", provider_config(server, **values))


async def paced_text(chat: OpenAIChatProvider, pace: Pace) -> tuple[str, bool]:
    """The text of one stream of ``chat`` read under ``pace``, and whether it ended with
    ``Final``."""
    stream = chat.stream(_REQUEST)
    assert isinstance(stream, PacedStream)
    stream.pace_reads(pace)
    texts: list[str] = []
    final = False
    async for event in stream.joined():
        if isinstance(event, TextDelta):
            texts.append(event.chunk.delta)
        final = isinstance(event, Final)
    return "".join(texts), final


async def plain_text(chat: OpenAIChatProvider) -> str:
    """The text of one unpaced stream of ``chat``."""
    texts = [e.chunk.delta async for e in chat.stream(_REQUEST) if isinstance(e, TextDelta)]
    return "".join(texts)


def sleeping(*secs: float) -> Callable[[], Awaitable[None]]:
    """A pace that sleeps ``secs[i]`` before the i-th paced read (the last value repeats)."""
    calls = 0

    async def pace() -> None:
        nonlocal calls
        await anyio.sleep(secs[min(calls, len(secs) - 1)])
        calls += 1

    return pace


def unread_bytes(port: int) -> int:
    """Bytes the kernel holds unread on this process's TCP sockets connected to ``port``
    (Linux: ``/proc/self/fd``). Only sockets are opened: ``socket.fromfd`` duplicates the
    descriptor first and leaks the duplicate when it is no socket."""
    unread = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if not stat.S_ISSOCK(os.stat(f"/proc/self/fd/{name}").st_mode):
                continue
            sock = socket.fromfd(int(name), socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            continue  # closed meanwhile
        with sock:
            try:
                peer = sock.getpeername()
            except OSError:
                continue  # not connected
            if not isinstance(peer, tuple) or peer[1] != port:
                continue
            unread += struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0\0\0\0"))[0]
    return unread


def port_of(server: ProviderServer) -> int:
    return httpx.URL(server.url).port or 80
