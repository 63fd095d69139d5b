"""The chat controls through the Telegram wire server and the provider server (architecture §5
"Chat controls", "Roles", "Usage and cost"): ``/model`` and ``/system`` change the next
request and survive a restart, a non-admin is refused in a group, ``/new`` empties the history
sent, ``/usage`` shows what the provider reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.chats.commands import NOT_ADMIN
from tests.controls_harness import ADMIN, GROUP, USER, controls_bot

pytestmark = pytest.mark.anyio

MODELS = """\
  system_prompt: "Configured prompt."
  models:
    smart: {provider: main, model: big-model}
    fast: {provider: main}
"""


def _system(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list) and messages[0]["role"] == "system"
    return str(messages[0]["content"])


async def test_model_and_system_change_the_next_request_and_survive_a_restart(
    tmp_path: Path,
) -> None:
    async with controls_bot(tmp_path, agent=MODELS) as bot:
        async with bot.running():
            await bot.ask("hello")
            assert bot.last_request()["model"] == "m"
            assert _system(bot.last_request()) == "Configured prompt."
            listing = await bot.ask("/model")
            assert "smart: big-model (main)" in listing and "fast: m (main)" in listing
            assert await bot.ask("/model smart") == "Model: smart, big-model (main)."
            assert "Unknown model 'huge'" in await bot.ask("/model huge")
            await bot.ask("/system Answer like a pirate.")
            asked = len(bot.requests())
            await bot.ask("second")
            assert len(bot.requests()) == asked + 1  # the commands asked no model
            assert bot.last_request()["model"] == "big-model"
            assert _system(bot.last_request()) == "Answer like a pirate."
            settings = await bot.ask("/settings")
            assert "big-model (main; /model smart)" in settings
            assert "set with /system): Answer like a pirate." in settings
        async with bot.running():  # a new process on the same store
            await bot.ask("after the restart")
            assert bot.last_request()["model"] == "big-model"
            assert _system(bot.last_request()) == "Answer like a pirate."
            await bot.ask("/system reset")
            await bot.ask("/model default")
            await bot.ask("third")
            assert bot.last_request()["model"] == "m"
            assert _system(bot.last_request()) == "Configured prompt."


async def test_in_a_group_only_an_admin_changes_settings(tmp_path: Path) -> None:
    async with controls_bot(tmp_path, agent=MODELS) as bot, bot.running():
        assert await bot.ask("/model smart", chat=GROUP, user=222) == NOT_ADMIN
        assert await bot.ask("/system Be rude.", chat=GROUP, user=222) == NOT_ADMIN
        await bot.ask("hi", chat=GROUP, user=222)
        assert bot.last_request()["model"] == "m"
        assert _system(bot.last_request()) == "Configured prompt."
        assert "smart" in await bot.ask("/model smart", chat=GROUP, user=ADMIN)
        await bot.ask("hi again", chat=GROUP, user=222)
        assert bot.last_request()["model"] == "big-model"
        # In a private chat the user acts for their own chat.
        assert await bot.ask("/model fast", user=USER) == "Model: fast, m (main)."


async def test_new_empties_the_history_sent(tmp_path: Path) -> None:
    async with controls_bot(tmp_path) as bot, bot.running():
        await bot.ask("one")
        await bot.ask("two")
        assert [m["content"] for m in bot.last_request()["messages"][1:]] == ["one", "ok", "two"]
        assert await bot.ask("/new") == "Conversation cleared."
        await bot.ask("three")
        assert [m["content"] for m in bot.last_request()["messages"][1:]] == ["three"]


async def test_usage_matches_what_the_provider_reported(tmp_path: Path) -> None:
    # Each answer reports 11 prompt and 5 completion tokens; $1 / $2 per million.
    prices = "    prices: {input: 1.0, output: 2.0}\n"
    async with controls_bot(tmp_path, prices=prices) as bot, bot.running():
        await bot.ask("one")
        await bot.ask("two")
        await bot.ask("three", chat=GROUP, user=USER)
        usage = await bot.ask("/usage")
        you, chat = usage.split("This chat:")
        cost = 3 * (11 * 1.0 + 5 * 2.0) / 1e6
        assert f"today: 48 tokens (33 in, 15 out), ${cost:.4f}" in you
        assert f"this month: 48 tokens (33 in, 15 out), ${cost:.4f}" in you
        assert "today: 32 tokens (22 in, 10 out)" in chat  # the private chat's two answers
        assert "estimated" not in usage
        status = await bot.ask("/status")
        assert "Model: m (main)" in status and "Tokens today in this chat: 32" in status
        assert "% of the budget" in status


async def test_a_user_over_the_daily_tokens_gets_the_limit_message_and_no_model_request(
    tmp_path: Path,
) -> None:
    limits = "limits:\n  user:\n    tokens_per_day: 20\n"
    async with controls_bot(tmp_path, top=limits) as bot, bot.running():
        assert await bot.ask("one") == "ok"  # 16 tokens
        assert await bot.ask("two") == "ok"  # 16 < 20: answered, now 32
        asked = len(bot.requests())
        refusal = await bot.ask("three")
        assert refusal.startswith("⛔ Your daily token limit (20) is used up: it resets in")
        assert refusal.endswith("(at 00:00 UTC).")
        assert len(bot.requests()) == asked
        assert "today: 32 tokens" in await bot.ask("/usage")  # commands still answer
        # Admins are exempt (limits.admins_exempt defaults to true); others are counted apart.
        assert await bot.ask("four", chat=GROUP, user=ADMIN) == "ok"
        assert await bot.ask("five", chat=GROUP, user=222) == "ok"
        assert len(bot.requests()) == asked + 2


async def test_messages_per_minute_is_counted_per_chat(tmp_path: Path) -> None:
    limits = "limits:\n  chat:\n    messages_per_minute: 1\n  admins_exempt: false\n"
    async with controls_bot(tmp_path, top=limits) as bot, bot.running():
        first = await bot.ask("one", chat=GROUP, user=ADMIN)
        second = await bot.ask("two", chat=GROUP, user=222)
        # Both fall in one minute, unless the minute turned between them.
        if first == "ok" and second == "ok":
            second = await bot.ask("three", chat=GROUP, user=222)
        expected = "⛔ This chat is sending more than 1 message a minute: try again in"
        assert second.startswith(expected), second
        assert await bot.ask("elsewhere") == "ok"  # another chat
