"""The ``on_message_sending`` hook (architecture §4 "Hook").

``on_message_sending(channel, chat_id, text) -> str | None`` is a plain (not ``async``) callable
named by an import path ``"package.module:function"``. It returns the text to send, or ``None``
to cancel that piece. It runs once per delivered piece and sees text already redacted by the
window. Its output is cut to 20 000 characters (the last one an ellipsis). Failing closed: an
exception, a result that is neither ``str`` nor ``None``, or no answer within
``hook_timeout_secs`` withholds that piece and is logged (by the delivery's
:func:`~orchestrator.delivery.hooks.guard_piece`); the bot keeps running.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

from orchestrator.policy.errors import PolicyError

__all__ = ["HOOK_OUTPUT_MAX_CHARS", "Hook", "call_hook", "load_hook"]

Hook = Callable[[str, str, str], "str | None"]
"""``(channel, chat_id, text) -> text to send | None``."""

HOOK_OUTPUT_MAX_CHARS = 20_000
"""The hook's output is cut to this many characters (``str`` characters, ellipsis included)."""
_ELLIPSIS = "…"
_KEY = "policy.on_message_sending"


def load_hook(path: str) -> Hook:
    """Import the hook named by ``"package.module:function"``.

    Raises:
        PolicyError: the path is malformed, the module cannot be imported, or the attribute is
            missing or not callable.
    """
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise PolicyError(_KEY, f"expected 'package.module:function', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any error raised while importing user code
        raise PolicyError(_KEY, f"cannot import {module_name!r}: {exc}") from exc
    hook = getattr(module, attr, None)
    if hook is None:
        raise PolicyError(_KEY, f"module {module_name!r} has no attribute {attr!r}")
    if not callable(hook):
        raise PolicyError(_KEY, f"{path!r} is not callable")
    if inspect.iscoroutinefunction(hook):
        raise PolicyError(_KEY, f"{path!r} is async; the hook must be a plain function")
    return hook  # type: ignore[no-any-return]


def call_hook(hook: Hook, channel: str, chat_id: str, text: str) -> str | None:
    """Run ``hook`` on one piece: its output, cut to ``HOOK_OUTPUT_MAX_CHARS``, or ``None``.

    Raises:
        Exception: whatever the hook raised.
        TypeError: it returned something that is neither ``str`` nor ``None``.
    """
    result = hook(channel, chat_id, text)
    if result is None:
        return None
    if not isinstance(result, str):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError(f"on_message_sending returned {type(result).__name__}, not str or None")
    if len(result) > HOOK_OUTPUT_MAX_CHARS:
        result = result[: HOOK_OUTPUT_MAX_CHARS - len(_ELLIPSIS)] + _ELLIPSIS
    return result
