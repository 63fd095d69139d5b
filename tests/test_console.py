"""The console channel, driven as a process would drive it but in-process: lines in, answers out
(architecture §7: only the console reads stdin; end of input ends its serve loop)."""

from __future__ import annotations

import io

import anyio

from channels.base import InboundMessage, MessageRef
from channels.console.adapter import QUIT_WINDOW_SECS, ConsoleChannel
from channels.console.commands import BOT_COMMANDS, HELP_TEXT
from channels.console.kind import ConsoleChannelConfig


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


class _TerminalOut(io.StringIO):
    """A stdout that says it is a terminal (as when `echo hi | relaybot run` runs in one)."""

    def isatty(self) -> bool:
        return True


async def test_piped_input_into_a_terminal_gets_no_banner_and_no_prompt() -> None:
    stdout = _TerminalOut()

    async def on_inbound(message: InboundMessage) -> None:
        await channel.send_message(message.chat_id, f"answer to {message.text}")
        await channel.reply_finished(message.chat_id)

    channel = ConsoleChannel(
        "term",
        ConsoleChannelConfig(kind="console"),
        on_inbound,
        stdin=io.StringIO("hello\n"),
        stdout=stdout,
    )
    await channel.start()
    with anyio.fail_after(5):
        await channel.serve()
    await channel.stop()
    out = stdout.getvalue()
    assert "answer to hello" in out
    assert "you>" not in out
    assert "relaybot" not in out  # the banner


async def test_help_and_unknown_commands_are_answered_here_and_bot_commands_go_on() -> None:
    stdout = io.StringIO()
    received: list[str] = []

    async def on_inbound(message: InboundMessage) -> None:
        received.append(message.text)
        await channel.reply_finished(message.chat_id)

    lines = (
        "/help\n/HELP@bot\n/frobnicate x\n/reset\n/stop\n/start\n//frobnicate\n/usr/bin is\n"
        "/model smart\n/system be brief\n/usage\n"
    )
    channel = ConsoleChannel(
        "term",
        ConsoleChannelConfig(kind="console"),
        on_inbound,
        stdin=io.StringIO(lines),
        stdout=stdout,
    )
    with anyio.fail_after(5):
        await channel.serve()
    assert received == [
        "/reset", "/stop", "/start", "/frobnicate", "/usr/bin is", "/model smart",
        "/system be brief", "/usage",
    ]  # fmt: skip
    out = stdout.getvalue()
    assert out.count(HELP_TEXT) == 2
    for item in ("/help", "/reset", "/stop", "Ctrl-C", "Ctrl-D"):
        assert item in HELP_TEXT
    assert "unknown command /frobnicate" in out
    assert BOT_COMMANDS <= {line.split()[0] for line in HELP_TEXT.splitlines() if "/" in line}
    assert {"/model", "/system", "/settings", "/status", "/usage", "/new"} <= BOT_COMMANDS


async def test_ctrl_c_is_stop_while_an_answer_runs_and_a_second_one_within_2_s_quits() -> None:
    """``interrupt`` (the daemon offers it SIGINT first): True while an answer runs, after
    passing ``/stop`` on; False for a second Ctrl-C within the quit window, or with no answer."""
    stdout = io.StringIO()
    now = [100.0]
    received: list[str] = []
    first: list[InboundMessage] = []

    async def on_inbound(message: InboundMessage) -> None:
        received.append(message.text)
        if message.text == "/stop":  # as the daemon does: /stop is over before the answer is
            await channel.reply_finished(message.chat_id)
            assert not channel._reply_done.is_set()
            await channel.send_message(first[0].chat_id, "cut short ⏹ Stopped.")
            await channel.reply_finished(first[0].chat_id)
        elif not first:
            first.append(message)
            await channel.send_message(message.chat_id, "the answer so far")
        else:
            await channel.reply_finished(message.chat_id)

    channel = ConsoleChannel(
        "term",
        ConsoleChannelConfig(kind="console"),
        on_inbound,
        stdin=io.StringIO(""),
        stdout=stdout,
        clock=lambda: now[0],
    )
    assert not await channel.interrupt()  # no answer runs (and no prompt): quit
    now[0] += QUIT_WINDOW_SECS + 0.1
    await channel._pass_on("tell me a story")  # as serve() does with a line; the answer runs
    assert not channel._reply_done.is_set()
    assert await channel.interrupt()  # /stop
    assert received == ["tell me a story", "/stop"]
    assert channel._reply_done.is_set()
    # One reply on the screen, printed once: the reply_finished of /stop ended nothing early.
    assert stdout.getvalue() == "the answer so far\n\ncut short ⏹ Stopped.\n"
    now[0] += 1.0
    assert not await channel.interrupt()  # within 2 s of the last one: quit
    assert received == ["tell me a story", "/stop"]


async def test_a_second_ctrl_c_after_the_window_is_stop_again() -> None:
    now = [0.0]
    received: list[str] = []

    async def on_inbound(message: InboundMessage) -> None:
        received.append(message.text)  # the answer never ends by itself here

    channel = ConsoleChannel(
        "term",
        ConsoleChannelConfig(kind="console"),
        on_inbound,
        stdin=io.StringIO(""),
        stdout=io.StringIO(),
        clock=lambda: now[0],
    )
    await channel._pass_on("question")
    assert await channel.interrupt()
    now[0] += QUIT_WINDOW_SECS + 0.1
    assert await channel.interrupt()  # 2.1 s later: /stop again, not quit
    assert received == ["question", "/stop", "/stop"]


async def test_a_draft_longer_than_the_terminal_shows_its_last_lines_as_it_grows() -> None:
    """The live region shows the draft's end (plain or formatted) while the answer grows past
    a screenful, and the whole answer is printed once it is over."""
    stdout = _TerminalOut()
    channel = ConsoleChannel(
        "term", ConsoleChannelConfig(kind="console"), _ignore, stdin=io.StringIO(""), stdout=stdout
    )
    paragraphs = [f"paragraph {i:04d} of the answer" for i in range(400)]
    ref = await channel.send_message("console", "\n\n".join(paragraphs[:10]))
    for formatted, upto in ((False, 200), (True, 400)):
        before = len(stdout.getvalue())
        text = "\n\n".join(paragraphs[:upto])
        await channel.edit_message(ref, text, formatted=formatted)
        drawn = stdout.getvalue()[before:]
        assert f"paragraph {upto - 1:04d}" in drawn  # the newest text shows
        assert "paragraph 0000" not in drawn  # the first screenful is not redrawn
        assert "…" in drawn
    before = len(stdout.getvalue())
    await channel.reply_finished("console")
    printed = stdout.getvalue()[before:]
    assert all(p in printed for p in paragraphs)
