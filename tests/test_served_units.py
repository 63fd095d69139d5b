"""The pure parts of the channels served over HTTP (architecture §3 "Served over HTTP"): the
content deltas of a streamed answer, the Chat Completions request read, and the access rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels.openai_api.deltas import ContentStream
from channels.openai_api.wire import RequestRejected, parse_request
from channels.web.access import bearer_token, is_loopback_listen, token_identity, token_index
from config.errors import ConfigError
from config.loader import load_config_text

WORDS = st.text(alphabet="ab \n`✓⏳", min_size=1, max_size=12)


@given(st.lists(WORDS, min_size=1, max_size=12), st.lists(st.booleans(), min_size=12))
def test_the_deltas_add_up_to_the_last_state_whatever_the_status_lines(
    pieces: list[str], tools_running: list[bool]
) -> None:
    """The engine's states only grow (the window never takes text back); a state showing a
    tool's status line streams nothing; the deltas join to the final text."""
    stream = ContentStream()
    streamed, text = "", ""
    for piece, tool in zip(pieces, tools_running, strict=False):
        text += piece
        streamed += stream.update("1", text + ("\n\n⏳ current_time…" if tool else ""))
    streamed += stream.update("1", text, final=True)  # the final edit, formatted: all text
    assert streamed == text == stream.text


def test_status_lines_are_streamed_once_only_when_asked() -> None:
    states = ["Let me look.", "Let me look.\n\n⏳ lookup…", "Let me look.\n\n✓ lookup 0.2 s"]
    states.append("Let me look.\n\nFound it.")
    quiet, shown = ContentStream(), ContentStream(show_tool_status=True)
    for state in states:
        quiet.update("1", state)
        shown.update("1", state)
    assert quiet.text == "Let me look.\n\nFound it."
    assert shown.text == "Let me look.\n\n⏳ lookup…\n\n✓ lookup 0.2 s\n\nFound it."


def test_a_new_message_continues_after_a_blank_line() -> None:
    stream = ContentStream()
    stream.update("1", "Images are not supported.")
    assert stream.update("2", "Hello") == "\n\nHello"
    assert stream.text == "Images are not supported.\n\nHello"


def test_a_request_is_its_own_conversation() -> None:
    asked = parse_request(
        {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                {"role": "assistant", "content": None},
                {"role": "tool", "content": "ignored", "tool_call_id": "x"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "And now?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                    ],
                },
            ],
        }
    )
    assert asked.images == (("image/png", b"\x89PN"),)
    assert asked.context == (("system", "Be brief."), ("user", "Hi"), ("assistant", ""))
    assert (asked.text, asked.stream, asked.include_usage, asked.model) == (
        "And now?",
        True,
        True,
        "m",
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0]"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://x"}}],
                    }
                ]
            },
            "messages[0]",
        ),
    ],
)
def test_a_bad_request_names_its_param(body: object, param: str | None) -> None:
    with pytest.raises(RequestRejected) as refused:
        parse_request(body)
    assert refused.value.param == param


def test_tokens_and_loopback() -> None:
    assert bearer_token("Bearer abc") == "abc" and bearer_token("Basic abc") is None
    assert token_index("two", ["one", "two"]) == 1 and token_index("", ["one"]) is None
    assert token_identity("secret-token").startswith("key-") and "secret" not in token_identity(
        "secret-token"
    )
    assert is_loopback_listen("127.0.0.1:0") and is_loopback_listen("[::1]:9")
    assert is_loopback_listen(":9464") and not is_loopback_listen("0.0.0.0:9464")


CONFIG = """\
providers:
  main: {{kind: openai_chat, base_url: "http://127.0.0.1:9/v1", api_key: k, model: m}}
agent:
  providers: [main]
channels:
{channels}server:
  listen: {listen}
"""


@pytest.mark.parametrize(
    ("channels", "listen", "problem"),
    [
        ("  web: {kind: web}\n", '"0.0.0.0:9464"', "auth: none serves only a loopback"),
        ("  web: {kind: web}\n", "null", "the page is served on server.listen"),
        ('  api: {kind: openai_api, tokens: ["0123456789abcdef"]}\n', "null", "server.listen"),
        ("  api: {kind: openai_api, tokens: [short]}\n", '"127.0.0.1:1"', "16 characters"),
        ("  web: {kind: web, auth: tokens}\n", '"0.0.0.0:1"', "needs at least one entry"),
    ],
)
def test_the_config_refuses_a_served_channel_it_cannot_serve_safely(
    channels: str, listen: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config_text(CONFIG.format(channels=channels, listen=listen), environ={})
    assert problem in str(refused.value)


def test_a_web_page_behind_a_proxy_may_listen_anywhere() -> None:
    channels = "  web: {kind: web, auth: trusted_user_header, trusted_user_header: X-User}\n"
    config = load_config_text(CONFIG.format(channels=channels, listen='"0.0.0.0:1"'), environ={})
    assert config.channels["web"].kind == "web"
