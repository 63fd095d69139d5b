"""The Matrix channel's pure parts (issue 12): Markdown → ``formatted_body``, the event readers
(relations, mentions, reply fallbacks, approval answers) and the error translation."""

from __future__ import annotations

from typing import Any

import nio
from hypothesis import given
from hypothesis import strategies as st

from channels.errors import (
    ChannelRateLimited,
    ChannelUnavailable,
    ChannelWriteFailed,
    MessageGone,
    MessageTooLong,
)
from channels.matrix.approvals import Approvals
from channels.matrix.client import translate
from channels.matrix.content import LIVE_KEY, edit_content, send_content
from channels.matrix.events import (
    approval_answer,
    is_edit,
    mentions_user,
    reaction_answer,
    reply_target,
    strip_reply_fallback,
    thread_root,
)
from channels.matrix.format import HTML_FORMAT, markdown_to_html, message_content, plain_to_html

ME = "@bot:relaybot.test"


def test_markdown_renders_to_matrix_html() -> None:
    assert markdown_to_html("Hello **world**") == "Hello <strong>world</strong>"
    assert markdown_to_html("a\n\nb") == "<p>a</p>\n<p>b</p>"
    code = markdown_to_html("```python\nx = 1\n\ny = 2\n```")
    assert code == '<pre><code class="language-python">x = 1\n\ny = 2\n</code></pre>'
    assert "<s>gone</s>" in markdown_to_html("~~gone~~")
    assert "<table>" in markdown_to_html("| a | b |\n|---|---|\n| 1 | 2 |")


def test_raw_html_from_the_model_is_text() -> None:
    assert markdown_to_html("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert plain_to_html("a <b>\nc & d") == "a &lt;b&gt;<br>c &amp; d"


def test_message_content_carries_body_and_formatted_body() -> None:
    formatted = message_content("**x**", formatted=True)
    assert formatted == {
        "msgtype": "m.text",
        "body": "**x**",
        "format": HTML_FORMAT,
        "formatted_body": "<strong>x</strong>",
        "m.mentions": {},
    }
    preview = message_content("**x**", formatted=False, msgtype="m.notice")
    assert preview["formatted_body"] == "**x**"
    assert preview["msgtype"] == "m.notice"


@given(st.text(max_size=300))
def test_any_text_renders_without_raising(text: str) -> None:
    assert isinstance(markdown_to_html(text), str)
    assert message_content(text, formatted=True)["body"] == text


def test_relations() -> None:
    thread = {
        "m.relates_to": {
            "rel_type": "m.thread",
            "event_id": "$root",
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": "$last"},
        }
    }
    assert thread_root(thread) == "$root"
    assert reply_target(thread) is None  # only the thread's fallback
    in_thread_reply = {"m.relates_to": {**thread["m.relates_to"], "is_falling_back": False}}
    assert reply_target(in_thread_reply) == "$last"
    plain_reply = {"m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}}
    assert reply_target(plain_reply) == "$q"
    assert thread_root(plain_reply) is None
    assert is_edit({"m.relates_to": {"rel_type": "m.replace", "event_id": "$e"}})
    assert not is_edit({"body": "x"})
    assert thread_root({"m.relates_to": "junk"}) is None


def test_reply_fallback_is_stripped() -> None:
    body = "> <@alice:x> the question\n> more\n\nmy answer"
    assert strip_reply_fallback(body) == "my answer"
    assert strip_reply_fallback("no quote") == "no quote"


def test_mentions() -> None:
    declared: dict[str, Any] = {"m.mentions": {"user_ids": [ME]}}
    assert mentions_user(declared, "hi", ME, "Relay")
    assert mentions_user({}, "hey @BOT:relaybot.test there", ME, "Relay")
    assert mentions_user({}, "relay, what now?", ME, "Relay")
    assert not mentions_user({}, "nobody here", ME, "Relay")
    assert not mentions_user({}, "nobody here", ME, "")


def test_approval_answers() -> None:
    assert approval_answer(" Yes. ") is True
    assert approval_answer("no!") is False
    assert approval_answer("maybe") is None
    on = {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$p", "key": "✅\ufe0f"}}
    assert reaction_answer(on) == ("$p", True)
    off = {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$p", "key": "❌"}}
    assert reaction_answer(off) == ("$p", False)
    other = {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$p", "key": "🎉"}}
    assert reaction_answer(other) is None


def test_error_responses_become_channel_errors() -> None:
    limited = translate(nio.ErrorResponse("slow down", "M_LIMIT_EXCEEDED", 1234), 10)
    assert isinstance(limited, ChannelRateLimited)
    assert limited.retry_after == 1.234
    unnamed = translate(nio.ErrorResponse("slow down", "M_LIMIT_EXCEEDED"), 10)
    assert isinstance(unnamed, ChannelRateLimited) and unnamed.retry_after == 5.0
    too_long = translate(nio.ErrorResponse("big", "M_TOO_LARGE"), 70000)
    assert isinstance(too_long, MessageTooLong) and too_long.length == 70000
    assert isinstance(translate(nio.ErrorResponse("gone", "M_NOT_FOUND"), 0), MessageGone)
    assert isinstance(translate(nio.ErrorResponse("no", "M_FORBIDDEN"), 0), ChannelWriteFailed)


def test_a_5xx_answer_did_not_land() -> None:
    class Transport:
        status = 502

    response = nio.ErrorResponse("bad gateway")
    response.transport_response = Transport()
    assert isinstance(translate(response, 0), ChannelUnavailable)


def test_send_content_relations() -> None:
    common: dict[str, Any] = {"formatted": True, "msgtype": "m.text", "live": False}
    direct = send_content("hi", thread_id=None, reply_to="$q", group=False, **common)
    assert "m.relates_to" not in direct
    group = send_content("hi", thread_id=None, reply_to="$q", group=True, **common)
    assert group["m.relates_to"] == {"m.in_reply_to": {"event_id": "$q"}}
    thread = send_content("hi", thread_id="$root", reply_to=None, group=True, **common)
    assert thread["m.relates_to"] == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$root"},
    }
    live = send_content(
        "hi", thread_id=None, reply_to=None, group=False, **{**common, "live": True}
    )
    assert live[LIVE_KEY] == {}


def test_edit_content_is_an_m_replace_with_new_content() -> None:
    edit = edit_content("$e", "**x**", formatted=True, msgtype="m.text", live=False)
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$e"}
    assert edit["body"] == "* **x**"
    assert edit["formatted_body"] == "* <strong>x</strong>"
    assert edit["m.new_content"]["body"] == "**x**"
    assert edit["m.new_content"]["formatted_body"] == "<strong>x</strong>"
    assert LIVE_KEY not in edit["m.new_content"]
    preview = edit_content("$e", "x", formatted=False, msgtype="m.notice", live=True)
    assert preview["m.new_content"][LIVE_KEY] == {}
    assert preview["m.new_content"]["msgtype"] == "m.notice"
    assert LIVE_KEY not in preview


async def test_approvals_take_the_first_answer_only() -> None:
    approvals = Approvals()
    one = approvals.open("!r", "$p1")
    assert approvals.text_answer("!r", None, "what?") is None
    assert approvals.text_answer("!r", None, "yes") == ("$p1", True)  # the only one open
    assert approvals.answer("$p1", True)
    assert one.answer is True and one.answered.is_set()
    assert not approvals.answer("$p1", False)
    assert approvals.text_answer("!r", "$p1", "no") is None  # answered already
    approvals.open("!r", "$p2")
    approvals.open("!r", "$p3")
    assert approvals.text_answer("!r", None, "no") is None  # two open: which one?
    assert approvals.text_answer("!r", "$p3", "no") == ("$p3", False)
    assert approvals.text_answer("!other", None, "no") is None
