"""The console channel (``kind: console``): an interactive terminal chat.

On a terminal the draft is rewritten in place (rich's ``Live``) and the final answer is rendered
as Markdown. When stdout is not a terminal only final answers are printed, one block per reply.
Only this channel reads stdin (DESIGN §7); end of input ends its :meth:`serve` once the running
answer is delivered.
"""

from __future__ import annotations

import getpass
import io
import sys
from typing import IO

import anyio
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from channels.base import Channel, InboundHandler, InboundMessage, MessageRef
from channels.limits import CONSOLE_LIMITS
from config.models import ConsoleChannelConfig

__all__ = ["ConsoleChannel"]

CHAT_ID = "console"


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
        self._console = Console(file=out, highlight=False)
        self._messages: dict[str, tuple[str, bool]] = {}  # id -> (text, formatted)
        self._order: list[str] = []
        self._next_id = 0
        self._live: Live | None = None
        self._reply_done = anyio.Event()
        self._user = _user_name()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._interactive:
            import readline  # noqa: F401 - line editing and history for input()

            self._console.print(
                f"[bold]relaybot[/] — console channel [dim]{self.name}[/]. "
                "Type a message; Ctrl-D to quit.",
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
        if not self._interactive:
            return None
        self._stop_live()
        self._console.print(f"[yellow]{prompt}[/] [dim](y/N)[/]")
        answer = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
        return answer is not None and answer.strip().lower() in ("y", "yes")

    # -- rendering ------------------------------------------------------------------------

    def render_formatted(self, text: str) -> str:
        """The final form of ``text``: its Markdown as rich renders it (without colours)."""
        out = io.StringIO()
        Console(file=out, width=self._console.width, color_system=None).print(Markdown(text))
        return out.getvalue().rstrip()

    def _read_line(self) -> str | None:
        if self._interactive:
            try:
                return self._console.input("[bold cyan]you>[/] ")
            except EOFError:
                return None
        line = self._stdin.readline()
        return line or None

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
