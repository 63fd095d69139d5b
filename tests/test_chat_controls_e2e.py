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
