"""The Telegram adapter against the local Bot API peer, with the real python-telegram-bot client
over HTTP on 127.0.0.1 (architecture §3, §8; cases C12–C15)."""

from __future__ import annotations

import asyncio
import datetime as dtm
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from telegram.error import BadRequest, NetworkError, RetryAfter, TimedOut

from channels.base import COMMAND_MENU, InboundMessage, MessageRef
from channels.errors import (
    ChannelRateLimited,
    ChannelStartError,
    ChannelTimeout,
    ChannelUnavailable,
    ChannelWriteFailed,
    MessageGone,
    MessageNotModified,
    MessageTooLong,
)
from channels.telegram.adapter import TelegramChannel, TelegramTimeouts
from channels.telegram.errors import translate_error
from channels.telegram.format import markdown_to_telegram
from channels.telegram.kind import TelegramChannelConfig
from tests.peers.telegram import ApiError, TelegramBotApiServer

CHAT = 111
FAST = TelegramTimeouts(connect_secs=2, read_secs=1, write_secs=2, pool_secs=1, long_poll_secs=1)
C14_DELTAS = ["All timestamps are ", "*UTC", "* and ", "```py\nx = 1", "\n```"]


class Inbox:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []

    async def __call__(self, message: InboundMessage) -> None:
        self.messages.append(message)


def _config(server: TelegramBotApiServer, **overrides: Any) -> TelegramChannelConfig:
    values: dict[str, Any] = {
        "kind": "telegram",
        "token": server.token,
        "base_url": server.base_url,
        "allowed_users": ["*"],
    }
    values.update(overrides)
    return TelegramChannelConfig(**values)


@pytest.fixture
async def server() -> AsyncIterator[TelegramBotApiServer]:
    async with TelegramBotApiServer() as peer:
        peer.open_chat(CHAT)
        yield peer


@pytest.fixture
def inbox() -> Inbox:
    return Inbox()


@pytest.fixture
async def channel(server: TelegramBotApiServer, inbox: Inbox) -> AsyncIterator[TelegramChannel]:
    tg = TelegramChannel("tg", _config(server), inbox, timeouts=FAST)
    await tg.start()
    yield tg
    await tg.stop()


# -- lifecycle ------------------------------------------------------------------------------


async def test_declares_limits_and_turn_unit(channel: TelegramChannel) -> None:
    assert (channel.limits.max_length, channel.limits.unit) == (4096, "utf16")
    assert channel.multi_message_unit == "turn"
    assert channel.supports_draft_updates()


async def test_start_polls_registers_commands_and_stop_ends_polling(
    server: TelegramBotApiServer, inbox: Inbox
) -> None:
    tg = TelegramChannel("tg", _config(server), inbox, timeouts=FAST)
    await tg.start()
    await server.wait_for(lambda: bool(server.calls_to("getUpdates")))
    assert [c["command"] for c in server.commands] == [name for name, _, _ in COMMAND_MENU]
    assert server.calls_to("getMe") and server.calls_to("deleteWebhook")
    await tg.stop()
    polls = len(server.calls_to("getUpdates"))
    assert server.calls_to("getUpdates")[-1].params["timeout"] == 0  # PTB confirms the offset
    await asyncio.sleep(0.2)
    assert len(server.calls_to("getUpdates")) == polls
    await tg.stop()  # idempotent


async def test_rejected_token_fails_start_with_one_line(
    server: TelegramBotApiServer, inbox: Inbox
) -> None:
    tg = TelegramChannel("tg", _config(server, token="1:rejected"), inbox, timeouts=FAST)
    with pytest.raises(ChannelStartError) as caught:
        await tg.start()
    assert str(caught.value) == "invalid token (401 Unauthorized)"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def test_unreachable_server_fails_start(inbox: Inbox) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = TelegramChannelConfig(
        kind="telegram", token="1:x", base_url=f"http://127.0.0.1:{port}/bot"
    )
    with pytest.raises(ChannelStartError) as caught:
        await TelegramChannel("tg", config, inbox, timeouts=FAST).start()
    message = str(caught.value)
    assert message.startswith(f"cannot reach the Bot API server at 127.0.0.1:{port}")
    assert "\n" not in message and "1:x" not in message


# -- primitives -----------------------------------------------------------------------------


async def test_send_edit_delete_typing(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    ref = await channel.send_message(str(CHAT), "Hello")
    assert ref == MessageRef(str(CHAT), "1")
    await channel.edit_message(ref, "Hello world")
    await channel.send_typing(str(CHAT))
    second = await channel.send_message(str(CHAT), "reply", reply_to=ref.message_id)
    assert server.messages(CHAT)[1].raw["reply_to_message"]["message_id"] == 1
    await channel.delete_message(second)
    assert server.states(CHAT) == [
        ("Hello",),
        ("Hello world",),
        ("Hello world", "reply"),
        ("Hello world",),
    ]
    assert server.calls_to("sendChatAction")[0].params["action"] == "typing"


async def test_c12_not_modified(server: TelegramBotApiServer, channel: TelegramChannel) -> None:
    ref = await channel.send_message(str(CHAT), "Hello world")
    with pytest.raises(MessageNotModified):
        await channel.edit_message(ref, "Hello world", formatted=True)
    assert server.texts(CHAT) == ["Hello world"]
    # nothing to format: the final form equals the preview, so the engine need not send it
    assert channel.render_formatted("Hello world") == "Hello world"
    assert channel.render_formatted("*UTC*") == "<i>UTC</i>"


async def test_too_long_is_mapped(server: TelegramBotApiServer, channel: TelegramChannel) -> None:
    with pytest.raises(MessageTooLong) as caught:
        await channel.send_message(str(CHAT), "😀" * 2049)
    assert (caught.value.limit, caught.value.length) == (4096, 4098)
    ref = await channel.send_message(str(CHAT), "short")
    with pytest.raises(MessageTooLong):
        await channel.edit_message(ref, "x" * 4097)
    assert server.calls_to("editMessageText")[0].error == "Bad Request: message is too long"


async def test_gone_is_mapped(server: TelegramBotApiServer, channel: TelegramChannel) -> None:
    ref = await channel.send_message(str(CHAT), "doomed")
    await channel.delete_message(ref)
    with pytest.raises(MessageGone):
        await channel.edit_message(ref, "edit")
    with pytest.raises(MessageGone):
        await channel.delete_message(ref)
    user_message = server.inject_message(CHAT, "not yours")
    with pytest.raises(MessageGone):  # "message can't be edited"
        await channel.edit_message(MessageRef(str(CHAT), str(user_message["message_id"])), "x")


async def test_flood_control_gives_exact_retry_after(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    ref = await channel.send_message(str(CHAT), "a")
    server.fail("editMessageText", call=2, error=ApiError.flood(9))
    await channel.edit_message(ref, "ab")
    with pytest.raises(ChannelRateLimited) as caught:
        await channel.edit_message(ref, "abc")
    assert caught.value.retry_after == 9.0
    assert len(server.calls_to("editMessageText")) == 2  # no retry behind the engine's back
    assert server.texts(CHAT) == ["ab"]


async def test_timed_out_edit_landed(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    ref = await channel.send_message(str(CHAT), "draft")
    server.delay("editMessageText", call=1, seconds=FAST.read_secs + 1)
    with pytest.raises(ChannelTimeout):
        await channel.edit_message(ref, "draft grows")
    assert server.texts(CHAT) == ["draft grows"]  # the write landed: retry it, never re-send
    with pytest.raises(MessageNotModified):
        await channel.edit_message(ref, "draft grows")


async def test_unparseable_entities_fail_the_write_for_the_engine_to_resend_plain(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    """The engine resends that message plain an interval later (architecture §3 "Spacing"): the
    adapter writes nothing more itself."""
    other = await channel.send_message(str(CHAT), "**other**", formatted=True)
    ref = await channel.send_message(str(CHAT), "preview")
    server.fail("editMessageText", call=1, error=ApiError.cant_parse("Unsupported entity"))
    with pytest.raises(ChannelWriteFailed, match=r"(?i)can't parse entities"):
        await channel.edit_message(ref, "**final**", formatted=True)
    [refused] = server.calls_to("editMessageText")
    assert refused.status == 400 and "entities" in refused.params
    assert server.texts(CHAT) == ["other", "preview"]
    await channel.edit_message(ref, "**final**")  # the engine's plain retry
    assert server.texts(CHAT) == ["other", "**final**"]
    assert server.messages(CHAT)[0].entities  # the other message keeps its formatting
    server.fail("sendMessage", call=3, error=ApiError.cant_parse("Unsupported entity"))
    with pytest.raises(ChannelWriteFailed):
        await channel.send_message(str(CHAT), "_new_", formatted=True)
    assert len(server.calls_to("sendMessage")) == 3
    assert server.texts(CHAT) == ["other", "**final**"]
    assert other.message_id == "1"


async def test_c14_every_preview_and_the_final_edit_are_accepted(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    text = C14_DELTAS[0]
    ref = await channel.send_message(str(CHAT), text)
    for delta in C14_DELTAS[1:]:
        text += delta
        await channel.edit_message(ref, text)  # previews are plain text
    await channel.edit_message(ref, text, formatted=True)
    assert all(c.status == 200 for c in server.calls if c.method != "getUpdates")
    final = server.messages(CHAT)[0]
    assert final.text.startswith("All timestamps are UTC and ")
    assert {"type": "italic", "offset": 19, "length": 3} in final.entities
    assert len(server.states(CHAT)) == len(C14_DELTAS) + 1


@pytest.mark.parametrize(
    "markdown",
    [
        "\n\n".join(f"**Part {i}.** " + "word " * 150 for i in range(8))[:6000],
        "😀" * 5000,  # 10 000 UTF-16 code units
    ],
    ids=["6000-chars", "10000-utf16-emoji"],
)
async def test_a_formatted_write_longer_than_a_message_is_never_split(
    server: TelegramBotApiServer, channel: TelegramChannel, markdown: str
) -> None:
    """The engine decides every boundary (architecture §3): the adapter refuses a text it was not
    given to fit, before any request, and never writes it in parts."""
    assert channel.render(markdown).length > 4096
    with pytest.raises(MessageTooLong):
        await channel.send_message(str(CHAT), markdown, formatted=True)
    ref = await channel.send_message(str(CHAT), "preview")
    with pytest.raises(MessageTooLong):
        await channel.edit_message(ref, markdown, formatted=True)
    assert len(server.calls_to("sendMessage")) == 1
    assert server.calls_to("editMessageText") == []


async def test_render_measures_what_telegram_counts(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    """Rules render as 8 dashes: the formatted form of this text is longer than a message while
    its plain text fits, and ``render`` says so (the engine then writes it plain)."""
    markdown = "---\n\n" * 800 + "end"  # 4003 units
    rendering = channel.render(markdown)
    assert rendering.length == markdown_to_telegram(markdown).utf16_length > 4096
    assert channel.render("**UTC** time").length == len("UTC time")
    ref = await channel.send_message(str(CHAT), "preview")
    with pytest.raises(MessageTooLong):
        await channel.edit_message(ref, markdown, formatted=True)
    await channel.edit_message(ref, markdown)
    assert server.texts(CHAT) == [markdown]


async def test_a_flood_limit_is_raised_at_once_never_waited(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    """The engine's spacing governs (architecture §1): one request, the 429 raised as it came."""
    server.fail("sendMessage", call=1, error=ApiError.flood(7))
    with pytest.raises(ChannelRateLimited) as caught:
        await channel.send_message(str(CHAT), "**hello**", formatted=True)
    assert caught.value.retry_after == 7
    assert len(server.calls_to("sendMessage")) == 1


async def test_a_5xx_answer_is_unavailable_it_did_not_land(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    server.fail("sendMessage", call=1, error=ApiError(502, "Bad Gateway"))
    with pytest.raises(ChannelUnavailable):
        await channel.send_message(str(CHAT), "hello")
    ref = await channel.send_message(str(CHAT), "hello")
    server.fail("editMessageText", call=1, error=ApiError(500, "Internal Server Error"))
    with pytest.raises(ChannelUnavailable):
        await channel.edit_message(ref, "hello again", formatted=True)
    assert server.texts(CHAT) == ["hello"]


# -- inbound --------------------------------------------------------------------------------


async def _next_inbound(server: TelegramBotApiServer, inbox: Inbox) -> InboundMessage:
    count = len(inbox.messages)
    await server.wait_for(lambda: len(inbox.messages) > count)
    return inbox.messages[-1]


async def test_inbound_messages(
    server: TelegramBotApiServer, channel: TelegramChannel, inbox: Inbox
) -> None:
    server.inject_message(CHAT, "hello", user_id=7, username="alice")
    direct = await _next_inbound(server, inbox)
    expected = InboundMessage("tg", "111", "7", "@alice", "hello", "1", True, False)
    # the peer's first update id; the username Telegram verified
    assert direct == replace(expected, update_ids=(1000,), sender_handle="alice")

    server.inject_message(-5, "just chatting", username=None, first_name="Bob")
    group = await _next_inbound(server, inbox)
    assert (group.chat_id, group.is_direct, group.mentions_bot, group.sender_name) == (
        "-5",
        False,
        False,
        "Bob",
    )
    assert group.sender_handle is None  # no username: a display name only, never for access
    server.inject_message(-5, "hey @Relay_Test_Bot what time is it?")
    assert (await _next_inbound(server, inbox)).mentions_bot
    server.inject_message(-5, "@someone_else hi")
    assert not (await _next_inbound(server, inbox)).mentions_bot

    ref = await channel.send_message("-5", "an answer")
    server.inject_message(-5, "follow-up", reply_to_message_id=int(ref.message_id))
    assert (await _next_inbound(server, inbox)).mentions_bot

    server.inject_message(-5, "/reset@relay_test_bot")
    reset = await _next_inbound(server, inbox)
    assert (reset.text, reset.mentions_bot) == ("/reset", True)
    server.inject_message(CHAT, "/start")
    assert (await _next_inbound(server, inbox)).text == "/start"


# -- approvals ------------------------------------------------------------------------------


async def _press(server: TelegramBotApiServer, choice: str, **who: Any) -> str:
    await server.wait_for(lambda: any(m.reply_markup for m in server.messages(CHAT)))
    prompt = next(m for m in server.messages(CHAT) if m.reply_markup)
    buttons = prompt.reply_markup["inline_keyboard"][0]  # type: ignore[index]
    data = next(b["callback_data"] for b in buttons if b["text"].startswith(choice))
    return server.inject_callback_query(CHAT, prompt.message_id, data, **who)


@pytest.mark.parametrize(("choice", "expected"), [("✅", True), ("❌", False)])
async def test_approval_buttons(
    server: TelegramBotApiServer, channel: TelegramChannel, choice: str, expected: bool
) -> None:
    waiting = asyncio.create_task(channel.request_approval(str(CHAT), "Run current_time?"))
    query_id = await _press(server, choice)
    assert await asyncio.wait_for(waiting, 5) is expected
    assert query_id in server.answered_callbacks
    final = server.messages(CHAT)[0]
    assert final.reply_markup is None and final.text.startswith("Run current_time?\n\n")


async def test_approval_timeout_is_none(
    server: TelegramBotApiServer, channel: TelegramChannel
) -> None:
    channel.approval_timeout_secs = 0.3
    assert await channel.request_approval(str(CHAT), "Run it?") is None
    assert server.messages(CHAT)[0].reply_markup is None


async def test_approval_ignores_users_not_allowed(
    server: TelegramBotApiServer, inbox: Inbox
) -> None:
    tg = TelegramChannel("tg", _config(server, allowed_users=["alice"]), inbox, timeouts=FAST)
    await tg.start()
    try:
        waiting = asyncio.create_task(tg.request_approval(str(CHAT), "Run it?"))
        stranger = await _press(server, "✅", user_id=666, username="mallory")
        await server.wait_for(lambda: stranger in server.answered_callbacks)
        assert not waiting.done()
        await _press(server, "❌", user_id=7, username="alice")
        assert await asyncio.wait_for(waiting, 5) is False
    finally:
        await tg.stop()


# -- webhook --------------------------------------------------------------------------------


async def test_webhook_mode(server: TelegramBotApiServer, inbox: Inbox) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    webhook = {
        "url": f"http://127.0.0.1:{port}/tg-hook",
        "listen": f"127.0.0.1:{port}",
        "secret_token": "hook-secret",
    }
    tg = TelegramChannel("tg", _config(server, webhook=webhook), inbox, timeouts=FAST)
    await tg.start()
    try:
        assert server.webhook_url == webhook["url"]
        server.inject_message(CHAT, "via webhook")
        assert (await _next_inbound(server, inbox)).text == "via webhook"
    finally:
        await tg.stop()


async def test_webhook_port_in_use_fails_start(server: TelegramBotApiServer, inbox: Inbox) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        listen = f"127.0.0.1:{busy.getsockname()[1]}"
        webhook = {"url": f"http://{listen}/tg-hook", "listen": listen}
        tg = TelegramChannel("tg", _config(server, webhook=webhook), inbox, timeouts=FAST)
        with pytest.raises(ChannelStartError) as caught:
            await tg.start()
    assert str(caught.value).startswith(f"cannot listen for the webhook on {listen}: ")


# -- error translation (the seam itself) --------------------------------------------------


def test_translate_retry_after_int_and_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    mapped = translate_error(RetryAfter(9))
    assert isinstance(mapped, ChannelRateLimited) and mapped.retry_after == 9.0
    monkeypatch.setenv("PTB_TIMEDELTA", "true")  # PTB then returns a timedelta
    mapped = translate_error(RetryAfter(dtm.timedelta(seconds=2.5)))
    assert isinstance(mapped, ChannelRateLimited) and mapped.retry_after == 2.5


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (BadRequest("MESSAGE IS NOT MODIFIED: details"), MessageNotModified),
        (BadRequest("Bad Request: message is not modified: specified new"), MessageNotModified),
        (BadRequest("Message to edit not found"), MessageGone),
        (BadRequest("Message to delete not found"), MessageGone),
        (BadRequest("Message can't be edited"), MessageGone),
        (BadRequest("Message is too long"), MessageTooLong),
        (BadRequest("Chat not found"), ChannelWriteFailed),
        (TimedOut(), ChannelTimeout),
        (NetworkError("httpx.ConnectError: refused"), ChannelUnavailable),
        (NetworkError("Bad Gateway"), ChannelUnavailable),
        (NetworkError("httpx.ReadError: connection lost"), ChannelTimeout),
    ],
)
def test_translate_by_description_prefix(exc: Exception, expected: type) -> None:
    assert type(translate_error(exc)) is expected  # type: ignore[arg-type]


def test_message_thread_id_is_a_thread_only_in_a_forum_topic() -> None:
    """Telegram also sets ``message_thread_id`` on replies in ordinary groups; only a topic
    message (``is_topic_message``) belongs to a thread of its own."""
    import datetime

    from telegram import Chat, Message

    from channels.telegram.inbound import topic_of as _topic

    chat = Chat(-100, Chat.SUPERGROUP)
    when = datetime.datetime.now(datetime.UTC)
    topic = Message(1, when, chat, message_thread_id=5, is_topic_message=True)
    reply_thread = Message(2, when, chat, message_thread_id=5)
    plain = Message(3, when, chat)
    assert [_topic(m) for m in (topic, reply_thread, plain)] == ["5", None, None]
