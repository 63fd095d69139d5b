"""Tool-call hygiene (architecture §5 "Tools"), pure: ids every provider accepts, and the guard
against calls that repeat or name no tool.

**Ids.** Providers disagree on tool-call ids: an OpenAI-compatible server may send
``functions.read:0`` or reuse ``call_0`` in every round, while Anthropic rejects any ``tool_use.id``
outside ``^[a-zA-Z0-9_-]+$`` and ids that are not unique, and OpenAI takes at most 40 characters.
:func:`normalise_ids` rewrites the messages of a request so that every call id is in
``[a-zA-Z0-9_-]``, at most :data:`MAX_ID_LENGTH` characters and unique in the request, and every
tool result carries the id of the call it answers. A result answers the earliest call of its
id not yet answered (results follow their calls in content order). Ids already valid and
unique are kept, so a provider's own ids (and its verbatim ``provider_items``) are untouched;
where an id changes, the ``tool_use`` blocks and ``function_call`` items in the message's
``provider_items`` are rewritten too. The history keeps the ids as received: the rewrite is
done for every request, so it also covers what was stored before.

**Repeats.** :class:`RepeatGuard` lets an identical call (same name, same arguments as JSON)
run at most :data:`REPEAT_LIMIT` times per turn; a further one, and a call of a tool not
offered, is answered with a tool error instead (the turn then asks the model to answer without
tools).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict, deque
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from providers.base import ChatMessage
from providers.events import ToolCall

__all__ = ["MAX_ID_LENGTH", "REPEAT_LIMIT", "RepeatGuard", "normalise_ids", "valid_id"]

MAX_ID_LENGTH = 40
"""The longest id sent: OpenAI's Chat Completions limit (Anthropic allows more)."""

REPEAT_LIMIT = 2
"""Runs per turn of one identical call."""

_VALID = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def valid_id(call_id: str) -> bool:
    """Whether every provider accepts ``call_id``."""
    return bool(_VALID.match(call_id))


def normalise_ids(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with call ids valid for every provider and unique (see the module doc)."""
    used: set[str] = set()
    waiting: dict[str, deque[str]] = defaultdict(deque)  # received id → new ids not answered
    out: list[ChatMessage] = []
    serial = 0
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            calls: list[ToolCall] = []
            assigned: dict[str, deque[str]] = defaultdict(deque)  # this message's, in order
            for call in message.tool_calls:
                new = _UNSAFE.sub("_", call.id)[:MAX_ID_LENGTH]
                while not new or new in used:
                    serial += 1
                    new = f"call_{serial}"
                used.add(new)
                waiting[call.id].append(new)
                assigned[call.id].append(new)
                calls.append(replace(call, id=new) if new != call.id else call)
            if any(new.id != call.id for new, call in zip(calls, message.tool_calls, strict=True)):
                items = tuple(_rename_item(item, assigned) for item in message.provider_items)
                message = replace(message, tool_calls=tuple(calls), provider_items=items)
        elif message.role == "tool":
            received = message.tool_call_id or ""
            queue = waiting.get(received)
            new = queue.popleft() if queue else _UNSAFE.sub("_", received)[:MAX_ID_LENGTH]
            if new != received:
                message = replace(message, tool_call_id=new)
        out.append(message)
    return out


def _rename_item(item: dict[str, Any], assigned: dict[str, deque[str]]) -> dict[str, Any]:
    """An Anthropic ``tool_use`` block or a Responses ``function_call`` item with the id its
    call got (the n-th item of an id gets the n-th call's); any other item as it is."""
    kind = item.get("type")
    key = "id" if kind == "tool_use" else "call_id" if kind == "function_call" else None
    if key is None or not assigned.get(item.get(key, "")):
        return item
    return {**item, key: assigned[item[key]].popleft()}


def repeated_error(name: str) -> str:
    return (
        f"this exact call of {name} (same arguments) already ran {REPEAT_LIMIT} times in this "
        "request and was not run again; its result would not change. Answer with what you have."
    )


def unknown_error(name: str, offered: Collection[str]) -> str:
    names = ", ".join(sorted(offered)) or "none"
    return f"there is no tool named {name!r} (the tools are: {names}); it was not run"


class RepeatGuard:
    """Counts a turn's calls. :meth:`refusal` is the tool error for a call that must not run,
    else ``None`` (and the call is counted)."""

    def __init__(self) -> None:
        self._runs: Counter[tuple[str, str]] = Counter()
        self.tripped = False
        """Some call was refused: the next round offers no tools."""

    def refusal(self, call: ToolCall, offered: Collection[str]) -> str | None:
        if call.name not in offered:
            self.tripped = True
            return unknown_error(call.name, offered)
        key = (call.name, _canonical(call.arguments))
        if self._runs[key] >= REPEAT_LIMIT:
            self.tripped = True
            return repeated_error(call.name)
        self._runs[key] += 1
        return None


def _canonical(arguments: str) -> str:
    """The arguments as JSON with sorted keys (``{"a":1,"b":2}`` and ``{"b": 2, "a": 1}`` are
    one call); text that is not JSON as it is."""
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments
