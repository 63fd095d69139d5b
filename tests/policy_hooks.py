"""``on_message_sending`` hooks for the outbound-policy tests, loaded by import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.policy import ReplyPolicy

__all__ = ["calls", "guard_here"]

calls: list[tuple[str, str, str]] = []
"""Every call of :func:`record`: ``(channel, chat_id, text)``."""


def record(channel: str, chat_id: str, text: str) -> str:
    calls.append((channel, chat_id, text))
    return text


def shout(channel: str, chat_id: str, text: str) -> str:
    return text.upper()


def cancel(channel: str, chat_id: str, text: str) -> None:
    return None


def boom(channel: str, chat_id: str, text: str) -> str:
    raise RuntimeError(f"hook failed on {text!r}")


def huge(channel: str, chat_id: str, text: str) -> str:
    return text + "x" * 30_000


def number(channel: str, chat_id: str, text: str) -> int:
    return 42


async def asynchronous(channel: str, chat_id: str, text: str) -> str:
    return text


def sign_with_key_start(channel: str, chat_id: str, text: str) -> str:
    """Ends each piece with the first half of an AWS key (a secret prefix the hook creates)."""
    return text + " AKIAABCDEFGH"


not_callable = "just a string"


def hang(channel: str, chat_id: str, text: str) -> str:
    """Never answers in any test's lifetime."""
    import time

    time.sleep(3600)
    return text


BACKTRACKING = r"(\w+\s?)+$"
"""Backtracks catastrophically on a long word followed by a non-word character: one C call of
``re.search`` that holds the GIL throughout (``"a" * 28 + "!"``: seconds to minutes)."""


def backtrack(channel: str, chat_id: str, text: str) -> str:
    """Searches :data:`BACKTRACKING` in the text and keeps it (fast on text that ends in a word
    character, catastrophic on ``"aaaa…a!"``)."""
    import re

    re.search(BACKTRACKING, text)
    return text


def exit_now(channel: str, chat_id: str, text: str) -> str:
    """Ends its process mid-call, as a crashing C extension would."""
    import os

    os._exit(3)


def guard_here(policy: ReplyPolicy, text: str, span: tuple[int, int] | None = None) -> str | None:
    """One delivered piece guarded as delivery guards it
    (:func:`orchestrator.delivery.hooks.guard_piece`: the hook's verdict, then ``redact_piece``
    on it, with the piece's ``span`` in the emitted text when the hook left it unchanged), the
    hook called in this thread. Raises what the hook raised (delivery withholds the piece
    then)."""
    verdict = policy.hook_piece_here(text)
    if verdict is None:
        return None
    return policy.redact_piece(verdict, span if verdict == text else None)
