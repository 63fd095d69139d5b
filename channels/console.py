"""The console channel (``kind: console``): an interactive terminal chat.

On a terminal the draft is rewritten in place (rich's ``Live``) and the final answer is rendered
as Markdown. When stdout is not a terminal only final answers are printed, one block per reply.
Only this channel reads stdin (architecture §7); end of input ends its :meth:`serve` once the
running answer is delivered.

Input: when stdin and stdout are both terminals, a banner greets the user and each line is read
with GNU readline behind a ``you>`` prompt that readline itself draws, so line editing (Ctrl-U,
Backspace at the start, Ctrl-L, history recall) redraws the prompt instead of erasing it; its
colour codes are wrapped in readline's ``\\001``/``\\002`` markers so they take no width.
Otherwise (piped input) there is no banner and no prompt: each line of stdin is one message.
``/help`` is answered here, with every command and key; any other ``/word`` that is not a command
of the bot is answered "unknown command" instead of going to the model (``//text`` sends
``/text``).
"""

from __future__ import annotations

import getpass
import io
import re
import sys
from typing import IO

import anyio
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from channels.base import Channel, InboundHandler, InboundMessage, MessageRef, Rendering
from channels.limits import CONSOLE_LIMITS
from config.models import ConsoleChannelConfig

__all__ = ["BOT_COMMANDS", "HELP_TEXT", "ConsoleChannel"]

CHAT_ID = "console"

BOT_COMMANDS = frozenset({"/start", "/reset", "/stop"})
"""Commands passed on to the bot (the daemon answers them); ``/help`` is answered here."""

HELP_TEXT = """\
Commands:
  /help     this list
  /reset    forget this conversation (its messages are deleted from the store)
  /stop     stop the running answer
  /start    say hello
Keys:
  Enter         send the line
  Ctrl-C        stop the running answer (at an empty prompt, or twice in 2 s: quit)
  Ctrl-D        quit (at an empty prompt)
  Up, Down      earlier lines (history); Ctrl-R searches them
  Ctrl-U        delete the line; Ctrl-L clears the screen
A line starting with // is sent as text starting with /."""

_PLAIN_PROMPT = "you> "
_COLOUR_PROMPT = "\001\033[1;36m\002you>\001\033[0m\002 "
"""Bold cyan ``you>``; readline gives no width to what is between ``\\001`` and ``\\002``
(RL_PROMPT_START_IGNORE, RL_PROMPT_END_IGNORE), so it redraws the prompt in the right place."""
_COMMAND = re.compile(r"/(?P<name>[A-Za-z0-9_]+)(?:@\S*)?")


class ConsoleChannel(Channel):
    limits = CONSOLE_LIMITS

    def __init__(
        self,
        name: str,
        config: ConsoleChannelConfig,
        on_inbound: InboundHandler,
        *,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
    ) -> None:
        super().__init__(name, config, on_inbound)
        self._stdin = stdin or sys.stdin
        out = stdout or sys.stdout
        self._interactive = out.isatty()
        # Banner, prompt and line editing need a person at a terminal on both ends.
        self._prompting = self._interactive and _isatty(self._stdin)
        self._console = Console(file=out, highlight=False)
        self._messages: dict[str, tuple[str, bool]] = {}  # id -> (text, formatted)
        self._order: list[str] = []
        self._next_id = 0
        self._live: Live | None = None
        self._reply_done = anyio.Event()
        self._user = _user_name()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._prompting:
            import readline  # noqa: F401 - line editing and history for input()

            self._console.print(
                f"[bold]relaybot[/] — console channel [dim]{self.name}[/]. "
                "Type a message; /help lists commands and keys; Ctrl-D quits.",
            )

    async def stop(self) -> None:
        self._stop_live()

    async def serve(self) -> None:
        """Read lines until end of input; each line is one message. Waits for each reply."""
        while True:
            line = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if line is None:
                return
            text = line.strip()
            if not text:
                continue
            if text.startswith("//"):
                text = text[1:]
            elif (local := _local_answer(text)) is not None:
                self._print_local(local)
                continue
            self._reply_done = anyio.Event()
            self._begin_reply()
            self._next_id += 1
            await self._on_inbound(_inbound(self.name, self._user, text, f"in-{self._next_id}"))
            await self._reply_done.wait()

    async def reply_finished(self, chat_id: str) -> None:
        self._end_reply()
        self._reply_done.set()

    # -- primitives -----------------------------------------------------------------------

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        self._next_id += 1
        message_id = str(self._next_id)
        self._messages[message_id] = (text, formatted)
        self._order.append(message_id)
        self._refresh()
        return MessageRef(chat_id, message_id)

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        if ref.message_id in self._messages:
            self._messages[ref.message_id] = (text, formatted)
            self._refresh()

    async def _delete_message(self, ref: MessageRef) -> None:
        if self._messages.pop(ref.message_id, None) is not None:
            self._order.remove(ref.message_id)
            self._refresh()

    async def _request_approval(
        self, chat_id: str, prompt: str, *, thread_id: str | None = None
    ) -> bool | None:
        if not self._prompting:
            return None
        self._stop_live()
        self._console.print(f"[yellow]{prompt}[/] [dim](y/N)[/]")
        answer = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
        return answer is not None and answer.strip().lower() in ("y", "yes")

    # -- rendering ------------------------------------------------------------------------

    def render(self, text: str) -> Rendering:
        """The final form of ``text``: its Markdown as rich renders it (without colours); a
        terminal has no length limit, so its length is that of ``text``."""
        out = io.StringIO()
        Console(file=out, width=self._console.width, color_system=None).print(Markdown(text))
        return Rendering(out.getvalue().rstrip(), len(text))

    def visible_text(self, text: str) -> str:
        """What the terminal shows of ``text``: its rich rendering."""
        return self.render(text).form

    def _read_line(self) -> str | None:
        """One line of input, or None at its end (Ctrl-D at an empty prompt)."""
        if self._prompting:
            coloured = self._console.color_system is not None and not self._console.no_color
            prompt = _COLOUR_PROMPT if coloured else _PLAIN_PROMPT
            try:
                return input(prompt)  # readline draws the prompt: editing keeps it in place
            except EOFError:
                self._console.file.write("\n")  # the shell's prompt starts on a line of its own
                self._console.file.flush()
                return None
        line = self._stdin.readline()
        return line or None

    def _print_local(self, text: str) -> None:
        """Print an answer made here (``/help``, an unknown command), not by the bot."""
        if self._prompting:
            self._console.print(Text(text))
        else:
            self._console.file.write(text + "\n")
            self._console.file.flush()

    def _begin_reply(self) -> None:
        self._messages.clear()
        self._order.clear()

    def _renderable(self) -> Text | Markdown:
        parts = [self._messages[i] for i in self._order]
        text = "\n\n".join(t for t, _ in parts)
        if parts and all(formatted for _, formatted in parts):
            return Markdown(text)
        return Text(text)

    def _live_view(self) -> Text | Markdown:
        """What the live region shows: the draft's last screenful. A live region taller than
        the terminal cannot be redrawn, so the newest text would stop showing."""
        view = self._renderable()
        if isinstance(view, Markdown):
            return view
        rows = max(3, self._console.height - 3)
        lines = view.wrap(self._console, self._console.width)
        if len(lines) <= rows:
            return view
        return Text("…\n").append(Text("\n").join(lines[-(rows - 1) :]))

    def _refresh(self) -> None:
        if not self._interactive:
            return
        if self._live is None:
            # transient: the live region is cleared at the end and the whole answer printed.
            self._live = Live(
                self._live_view(), console=self._console, auto_refresh=False, transient=True
            )
            self._live.start()
        self._live.update(self._live_view(), refresh=True)

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
            if self._order:
                self._console.print(self._renderable())

    def _end_reply(self) -> None:
        if self._interactive:
            self._stop_live()
        elif self._order:
            text = "\n\n".join(self._messages[i][0] for i in self._order)
            self._console.file.write(text + "\n")
            self._console.file.flush()
        self._begin_reply()


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or closed
        return False


def _local_answer(text: str) -> str | None:
    """The answer to ``text`` made by the console itself, or None when it goes to the bot."""
    match = _COMMAND.fullmatch(text.split(maxsplit=1)[0])
    if match is None:
        return None  # not a command: a message (also "/usr/bin is ...")
    command = "/" + match.group("name").lower()
    if command == "/help":
        return HELP_TEXT
    if command in BOT_COMMANDS:
        return None
    return f"unknown command {command} — /help lists the commands (//text sends /text)"


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


def _inbound(channel: str, user: str, text: str, message_id: str) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        chat_id=CHAT_ID,
        sender_id=user,
        sender_name=user,
        text=text,
        message_id=message_id,
        is_direct=True,
    )
