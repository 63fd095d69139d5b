"""Slack controls end to end (architecture §3 "Stop", approvals): Block Kit Approve / Deny and
Stop buttons that only the asker may press, and the chat commands as slash commands."""

from __future__ import annotations

from pathlib import Path

from tests.peers.slack import SlackServer, StoredMessage
from tests.slack_harness import running_bot, started_channel
from tests.telegram_harness import reply, text_stream, tool_call_stream
from tests.test_policy_telegram_e2e import pieces


def _with_button(peer: SlackServer, channel: str, action_id: str) -> list[StoredMessage]:
    return [
        m
        for m in peer.web.messages.values()
        if m.channel == channel
        and any(e.get("action_id") == action_id for b in m.blocks for e in b.get("elements", []))
    ]


async def test_an_approval_is_asked_with_buttons_and_only_the_asker_answers(
    tmp_path: Path,
) -> None:
    replies = [reply(tool_call_stream(["Checking."])), reply(text_stream(["It is noon."]))]
    agent = "  require_approval: [current_time]\n"
    async with running_bot(tmp_path, replies, agent_extra=agent) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel
        before = bot.channel.replies_finished
        asked = await peer.inject_message("what time is it?")
        await peer.wait_until(lambda: bool(_with_button(peer, dm, "relaybot_approve")))
        [prompt] = _with_button(peer, dm, "relaybot_approve")
        assert prompt.thread_ts == asked
        await peer.press(dm, prompt.ts, "relaybot_approve", user="U0MALLORY")  # ignored
        await peer.press(dm, prompt.ts, "relaybot_approve")
        await peer.wait_until(lambda: bot.channel.replies_finished >= before + 1, within=20)
    assert prompt.text.endswith("✅ Approved.") and len(prompt.blocks) == 1  # buttons gone
    second = bot.provider.requests_to("/v1/chat/completions")[1].json["messages"]
    assert [m["role"] for m in second][-2:] == ["assistant", "tool"]
    assert any("It is noon." in m.text for m in bot.answers(dm))


async def test_the_stop_button_ends_the_running_answer_for_the_asker_only(tmp_path: Path) -> None:
    answer = " ".join(f"slow{i}" for i in range(400))
    async with running_bot(
        tmp_path, [reply(text_stream(pieces(answer, 5)), delay_secs=0.03)]
    ) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel
        before = bot.channel.replies_finished
        await peer.inject_message("go on and on")
        await peer.wait_until(lambda: bool(_with_button(peer, dm, "relaybot_stop")))
        await peer.wait_until(lambda: bool(peer.calls("chat.appendStream")))
        [control] = _with_button(peer, dm, "relaybot_stop")
        await peer.press(dm, control.ts, "relaybot_stop", user="U0MALLORY")  # ignored
        await peer.press(dm, control.ts, "relaybot_stop")
        await peer.wait_until(lambda: bot.channel.replies_finished >= before + 2, within=20)
        await peer.wait_until(lambda: control.deleted)
    [message] = bot.answers(dm)
    assert not message.streaming
    shown = message.text
    assert "Stopped" in shown and len(shown) < len(answer)
    assert not [r for r in peer.calls("chat.startStream") if r.args.get("recipient_user_id")]


async def test_a_slash_command_acts_in_the_users_latest_thread(tmp_path: Path) -> None:
    async with running_bot(tmp_path, [reply(text_stream(["First answer."]))]) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel
        asked = await bot.ask("hello")
        before = bot.channel.replies_finished
        envelope = await peer.slash("/reset")
        await peer.wait_until(lambda: bot.channel.replies_finished >= before + 1)
    ack = peer.acked(envelope)
    assert ack is not None and ack["payload"]["text"] == "/reset"
    notices = [m for m in bot.answers(dm) if m.text != "First answer."]
    assert notices and all(m.thread_ts == asked for m in notices)


async def test_typing_posts_the_stop_button_once_then_the_thinking_status() -> None:
    async with SlackServer() as peer, started_channel(peer) as (channel, inbox):
        asked = await peer.inject_message("think first")
        await peer.wait_until(lambda: bool(inbox))
        dm = peer.dm_channel
        await channel.send_typing(dm, thread_id=asked)
        await channel.send_typing(dm, thread_id=asked)
        assert len(_with_button(peer, dm, "relaybot_stop")) == 1
        assert peer.web.statuses == [(dm, asked, "is thinking…")]
        peer.fail("assistant.threads.setStatus", "not_allowed")  # not an assistant thread
        await channel.send_typing(dm, thread_id=asked)
        await channel.send_typing(dm, thread_id=asked)
        assert len(peer.calls("assistant.threads.setStatus", ok=False)) == 2  # then no more
        await channel.reply_finished(dm)
        assert _with_button(peer, dm, "relaybot_stop")[0].deleted
