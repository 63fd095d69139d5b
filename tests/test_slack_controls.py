"""Slack controls end to end (architecture §3 "Buttons", §5 "Chat controls"): Block Kit
Approve / Deny, Stop and Regenerate buttons decided by the orchestrator (the asker or an admin;
anyone else told with chat.postEphemeral), and the chat commands as slash commands."""

from __future__ import annotations

from pathlib import Path

from channels.base import COMMAND_MENU
from channels.slack.commands import manifest_commands
from orchestrator.chats.presses import NOT_YOURS
from tests.peers.slack import SlackServer, StoredMessage
from tests.peers.slack_web import Ephemeral
from tests.slack_harness import SlackBot, running_bot, started_channel
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
        await peer.press(dm, prompt.ts, "relaybot_approve", user="U0MALLORY")  # refused
        await peer.wait_until(lambda: bool(peer.web.ephemerals))
        assert peer.web.ephemerals == [Ephemeral(dm, "U0MALLORY", NOT_YOURS, asked)]
        await peer.press(dm, prompt.ts, "relaybot_approve")
        await peer.wait_until(lambda: bot.channel.replies_finished >= before + 1, within=20)
    assert prompt.text.endswith("✅ Approved.") and len(prompt.blocks) == 1  # buttons gone
    second = bot.provider.requests_to("/v1/chat/completions")[1].json["messages"]
    assert [m["role"] for m in second][-2:] == ["assistant", "tool"]
    assert any("It is noon." in m.text for m in bot.answers(dm))


async def test_the_stop_button_ends_the_answer_for_the_asker_or_an_admin_only(
    tmp_path: Path,
) -> None:
    answer = " ".join(f"slow{i}" for i in range(400))
    slow = reply(text_stream(pieces(answer, 5)), delay_secs=0.03)
    admins = '    admins: ["U0ADMIN01"]\n'
    async with running_bot(tmp_path, [slow, slow], extra=admins) as bot:
        peer = bot.peer
        for presser in (peer.user, "U0ADMIN01"):
            message = await _stop_pressed_by(bot, presser)
            assert not message.streaming
            assert "Stopped" in message.text and len(message.text) < len(answer)
        assert not peer.web.ephemerals
    assert not [r for r in peer.calls("chat.startStream") if r.args.get("recipient_user_id")]


async def _stop_pressed_by(bot: SlackBot, presser: str) -> StoredMessage:
    """A slow answer in the DM, its Stop pressed by Mallory (refused), then by ``presser``;
    returns the answer once its reply is finished and the Stop button gone."""
    peer, dm = bot.peer, bot.peer.dm_channel
    before = bot.channel.replies_finished
    asked = await peer.inject_message("go on and on")
    await peer.wait_until(lambda: bool(_live(peer, dm, "relaybot_stop")))
    await peer.wait_until(lambda: bool(_answer_in(bot, dm, asked)))
    [control] = _live(peer, dm, "relaybot_stop")
    await peer.press(dm, control.ts, "relaybot_stop", user="U0MALLORY")  # refused
    await peer.wait_until(lambda: bool(peer.web.ephemerals))
    assert peer.web.ephemerals.pop() == Ephemeral(dm, "U0MALLORY", NOT_YOURS, asked)
    await peer.press(dm, control.ts, "relaybot_stop", user=presser)
    await peer.wait_until(lambda: bot.channel.replies_finished >= before + 1, within=20)
    await peer.wait_until(lambda: control.deleted)
    [message] = _answer_in(bot, dm, asked)
    return message


def _live(peer: SlackServer, channel: str, action_id: str) -> list[StoredMessage]:
    return [m for m in _with_button(peer, channel, action_id) if not m.deleted]


def _answer_in(bot: SlackBot, channel: str, thread: str) -> list[StoredMessage]:
    return [m for m in bot.answers(channel) if m.thread_ts == thread]


async def test_regenerate_asks_again_below_the_last_answer_with_the_history_replaced(
    tmp_path: Path,
) -> None:
    replies = [reply(text_stream(["Four."])), reply(text_stream(["Still four."]))]
    async with running_bot(tmp_path, replies) as bot:
        peer, dm = bot.peer, bot.peer.dm_channel
        asked = await bot.ask("what is two and two?")
        [first] = _live(peer, dm, "relaybot_regenerate")
        assert first.thread_ts == asked and not _live(peer, dm, "relaybot_stop")
        await peer.press(dm, first.ts, "relaybot_regenerate", user="U0MALLORY")  # refused
        await peer.wait_until(lambda: bool(peer.web.ephemerals))
        assert peer.web.ephemerals == [Ephemeral(dm, "U0MALLORY", NOT_YOURS, asked)]
        before = bot.channel.replies_finished
        await peer.press(dm, first.ts, "relaybot_regenerate")
        await peer.wait_until(lambda: bot.channel.replies_finished >= before + 1, within=20)
        await peer.wait_until(lambda: len(_live(peer, dm, "relaybot_regenerate")) == 1
                              and first.deleted)  # fmt: skip
    one, two = bot.provider.requests_to("/v1/chat/completions")
    assert one.json["messages"] == two.json["messages"]
    assert two.json["messages"][-1] == {"role": "user", "content": "what is two and two?"}
    answers = [m.text for m in bot.answers(dm)]
    assert answers == ["Four.", "Still four."]
    [last] = _live(peer, dm, "relaybot_regenerate")
    assert last.thread_ts == asked and last.ts > bot.answers(dm)[-1].ts


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


async def test_every_slash_command_is_acknowledged_and_reaches_the_bot_as_its_chat_command() -> (
    None
):
    declared = [(entry["command"], "x" if "usage_hint" in entry else "") for entry in
                manifest_commands()]  # fmt: skip
    async with SlackServer() as peer, started_channel(peer) as (_channel, inbox):
        asked = await peer.inject_message("hello")
        await peer.wait_until(lambda: bool(inbox))
        envelopes = [await peer.slash(command, text) for command, text in declared]
        await peer.wait_until(lambda: len(inbox) == 1 + len(declared))
    for envelope, (command, _) in zip(envelopes, declared, strict=True):
        ack = peer.acked(envelope)
        assert ack is not None and ack["payload"] == {"response_type": "ephemeral", "text": command}
    expected = [f"/{name} x" if argument else f"/{name}" for name, _, argument in COMMAND_MENU]
    assert [m.text for m in inbox[1:]] == expected
    assert {m.thread_id for m in inbox[1:]} == {asked}


async def test_typing_posts_the_stop_button_once_then_the_thinking_status() -> None:
    async with SlackServer() as peer, started_channel(peer) as (channel, inbox):
        asked = await peer.inject_message("think first")
        await peer.wait_until(lambda: bool(inbox))
        dm = peer.dm_channel
        await channel.send_typing(dm, thread_id=asked)  # no answer yet: no Stop
        assert not _with_button(peer, dm, "relaybot_stop")
        await channel.answer_started(dm, asked, peer.user)
        await channel.send_typing(dm, thread_id=asked)
        await channel.send_typing(dm, thread_id=asked)
        assert len(_with_button(peer, dm, "relaybot_stop")) == 1
        assert peer.web.statuses == [(dm, asked, "is thinking…")] * 2
        peer.fail("assistant.threads.setStatus", "not_allowed")  # not an assistant thread
        await channel.send_typing(dm, thread_id=asked)
        await channel.send_typing(dm, thread_id=asked)
        assert len(peer.calls("assistant.threads.setStatus", ok=False)) == 3  # then no more
        await channel.answer_finished(dm, asked, regenerate=False)
        assert _with_button(peer, dm, "relaybot_stop")[0].deleted
        assert not _with_button(peer, dm, "relaybot_regenerate")
