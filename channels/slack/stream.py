"""Slack's native text streaming as edits of a draft (architecture §3 "Contract"). Pure.

``chat.startStream`` posts a message that ``chat.appendStream`` extends and ``chat.stopStream``
finishes (https://docs.slack.dev/reference/methods/chat.startStream); appended text cannot be
taken back. The delivery engine drives a ``partial`` reply as a draft it sends and then edits
with the whole text released so far, so each edit of a streaming message becomes one step:

    edit's text                              step
    ----------------------------------------------------------------------------------------
    the streamed text, plain                 Unchanged (MessageNotModified: nothing to send)
    the streamed text, formatted (final)     Stop(None): stopStream
    streamed text + delta, plain             Append(delta): appendStream (delta ≤ 12,000)
    streamed text + delta, formatted         Stop(delta): stopStream with the delta
    anything else (a restart, a rewrite,
    a delta over 12,000 characters)          Close: stopStream, then chat.update to the text
    any edit once the stream stopped         Update: chat.update

So what reaches Slack is exactly what the policy released (the engine's text is the redacted
text), the appends concatenate to it, and a text that no longer extends what was streamed (a
restart rolled the draft back, a hook rewrote it) ends the stream and the message is edited
to the new text: it never stands as a half answer looking complete. A step that failed changes
nothing here, so the engine's retry (after a 429's ``Retry-After``) sends the delta again from
what Slack has: nothing lost or doubled.
"""

from __future__ import annotations

from dataclasses import dataclass

from channels.slack.kind import SLACK_MAX_STREAM_TEXT

__all__ = ["Append", "Close", "Step", "Stop", "Stream", "Unchanged", "Update", "next_step"]


@dataclass(slots=True)
class Stream:
    """A streaming message: the ``markdown_text`` Slack has of it, whether it is open, and
    the thread it answers in."""

    shown: str
    open: bool = True
    thread: str | None = None


@dataclass(frozen=True, slots=True)
class Unchanged:
    pass


@dataclass(frozen=True, slots=True)
class Append:
    delta: str


@dataclass(frozen=True, slots=True)
class Stop:
    delta: str | None


@dataclass(frozen=True, slots=True)
class Close:
    pass


@dataclass(frozen=True, slots=True)
class Update:
    pass


Step = Unchanged | Append | Stop | Close | Update


def next_step(stream: Stream, text: str, *, formatted: bool) -> Step:
    """The write that makes the streaming message show ``text`` (module docstring)."""
    if not stream.open:
        return Update()
    if not text.startswith(stream.shown):
        return Close()
    delta = text[len(stream.shown) :]
    if len(delta) > SLACK_MAX_STREAM_TEXT:
        return Close()
    if formatted:
        return Stop(delta or None)
    return Append(delta) if delta else Unchanged()
