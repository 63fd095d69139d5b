"""A peer server run on an event loop of its own, in a thread: for tests that drive a process
synchronously (through a pty, :mod:`tests.terminal`) while the peer answers it.

The peer is any async context manager (:class:`tests.peers.provider_server.ProviderServer`...);
what it records is read from the test's thread (plain attributes, read under the GIL).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

__all__ = ["serving_in_thread"]

_P = TypeVar("_P")


@contextlib.contextmanager
def serving_in_thread(
    peer: AbstractAsyncContextManager[_P], *, timeout_secs: float = 30.0
) -> Iterator[_P]:
    """Enter ``peer`` on a new event loop in a daemon thread, yield what it entered as, and
    exit it there; entering or exiting longer than ``timeout_secs`` fails (TimeoutError)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="peer loop", daemon=True)
    thread.start()
    try:
        entered = asyncio.run_coroutine_threadsafe(peer.__aenter__(), loop).result(timeout_secs)
        try:
            yield entered
        finally:
            exiting = peer.__aexit__(None, None, None)
            asyncio.run_coroutine_threadsafe(exiting, loop).result(timeout_secs)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_secs)
        loop.close()
