"""Chat-side rough edges through the Telegram wire peer, the real daemon and a local Chat
Completions server (architecture §3 "Access", §7): ``/help`` lists the commands and is not
``/start``'s hello; ``/new`` is ``/reset``; a user who is not allowed is told their own id once,
so the admin can add it."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.peers.provider_server import ProviderServer
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_chats import PATH, config_text, daemon_running, observed
from tests.telegram_harness import CHAT, reply, running_bot, text_stream


async def test_help_lists_the_commands_and_start_says_hello(tmp_path: Path) -> None:
    async with running_bot(tmp_path, [reply(text_stream(["unused"]))]) as bot:
        await bot.ask("/start")
        await bot.ask("/help")
    hello, help_text = bot.peer.texts(CHAT)
    assert hello != help_text and "/help" in hello
    for command in ("/stop", "/reset", "/new", "/help"):
        assert command in help_text
    assert bot.provider.requests == []


async def test_new_is_an_alias_of_reset(tmp_path: Path) -> None:
    replies = [reply(text_stream(["first answer"])), reply(text_stream(["second answer"]))]
    async with running_bot(tmp_path, replies) as bot:
        await bot.ask("remember the word kiwi")
        await bot.ask("/new")
        await bot.ask("which word?")
    assert bot.peer.texts(CHAT)[1] == "Conversation cleared."
    last = bot.provider.requests[-1].json["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == ["which word?"]


STRANGER = 222


async def test_a_user_who_is_not_allowed_is_told_their_id_once(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        provider.script(PATH, [reply(text_stream(["unused"]))])
        text = config_text(peer, provider, tmp_path).replace(
            'allowed_users: ["*"]', "allowed_users: [999]"
        )
        async with daemon_running(text, tmp_path) as daemon:
            channel = observed(daemon)
            for attempt in range(3):
                before = channel.replies_finished
                peer.inject_message(STRANGER, f"hello {attempt}", user_id=STRANGER)
                with anyio.fail_after(10):
                    await channel.wait_replies(before + 1)
            # Another channel-wide stranger in a group, not addressing the bot: never answered.
            before = channel.replies_finished
            peer.inject_message(-100, "chatter", user_id=333, chat_type="supergroup")
            with anyio.fail_after(10):
                await channel.wait_replies(before + 1)
    notices = peer.texts(STRANGER)
    assert len(notices) == 1, notices
    assert f"Your user id is {STRANGER}" in notices[0] and "allowed_users" in notices[0]
    assert peer.texts(-100) == []
    assert provider.requests == []
