"""The model's Markdown as Slack shows it (architecture §3 "Formatting and splitting"). Pure.

Slack has two text forms: ``mrkdwn`` (the ``text`` of chat.postMessage / chat.update:
``*bold*``, ``<url|label>``; ``&``, ``<`` and ``>`` escaped as ``&amp;``, ``&lt;``, ``&gt;``,
https://docs.slack.dev/messaging/formatting-message-text) and standard Markdown (the
``markdown_text`` of the streaming methods, which Slack renders itself). A formatted message
is the mrkdwn of ``slackify-markdown`` (a maintained converter on markdown-it-py); a plain one
is the text escaped, sent with ``mrkdwn: false`` so nothing in it is read as markup.
"""

from __future__ import annotations

from slackify_markdown import slackify_markdown

from channels.base import Rendering

__all__ = ["escape", "mrkdwn", "rendering"]


def escape(text: str) -> str:
    """``text`` with Slack's three control characters escaped (shown as written)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mrkdwn(text: str) -> str:
    """The model's Markdown ``text`` as Slack mrkdwn (trailing line breaks dropped)."""
    return str(slackify_markdown(text)).rstrip("\n")


def rendering(text: str) -> Rendering:
    """``text`` formatted: its mrkdwn, measured in characters (Slack's unit)."""
    form = mrkdwn(text)
    return Rendering(form, len(form))
