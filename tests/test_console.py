"""The console channel, driven as a process would drive it but in-process: lines in, answers out
(DESIGN §7: only the console reads stdin; end of input ends its serve loop)."""

from __future__ import annotations

import io

import anyio

from channels.base import InboundMessage, MessageRef
from channels.console import ConsoleChannel
from config.models import ConsoleChannelConfig


async def test_each_line_is_one_message_and_the_loop_waits_for_its_reply() -> None:
    stdout = io.StringIO()
    received: list[InboundMessage] = []
    channel: ConsoleChannel

    async def on_inbound(message: InboundMessage) -> None:
        received.append(message)
        ref = await channel.send_message(message.chat_id, f"draft for {message.text}")
        await channel.edit_message(ref, f"answer to **{message.text}**", formatted=True)
        await channel.reply_finished(message.chat_id)

    channel = ConsoleChannel(
        "term",
        ConsoleChannelConfig(kind="console"),
        on_inbound,
        stdin=io.StringIO("first\n\n  second  \n"),
        stdout=stdout,
    )
    await channel.start()
    with anyio.fail_after(5):
        await channel.serve()  # returns at end of input
    await channel.stop()
    assert [m.text for m in received] == ["first", "second"]
    assert all(m.is_direct and m.chat_id == "console" for m in received)
    # Not a terminal: only final answers are printed, one block per reply.
    assert stdout.getvalue() == "answer to **first**\nanswer to **second**\n"


async def test_deleted_messages_are_not_printed() -> None:
    stdout = io.StringIO()
    channel = ConsoleChannel(
        "term", ConsoleChannelConfig(kind="console"), _ignore, stdin=io.StringIO(""), stdout=stdout
    )
    ref = await channel.send_message("console", "withdrawn")
    await channel.delete_message(MessageRef("console", ref.message_id))
    kept = await channel.send_message("console", "kept")
    assert kept.message_id != ref.message_id
    await channel.reply_finished("console")
    assert stdout.getvalue() == "kept\n"


def test_final_form_is_rendered_markdown() -> None:
    channel = ConsoleChannel(
        "term", ConsoleChannelConfig(kind="console"), _ignore, stdout=io.StringIO()
    )
    assert channel.render_formatted("plain words") == "plain words"
    assert channel.render_formatted("**bold** words") == "bold words"


async def _ignore(message: InboundMessage) -> None:
    return None
