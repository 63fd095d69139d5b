"""The console channel (``kind: console``): an interactive terminal chat.

On a terminal the draft is rewritten in place (rich's ``Live``) and the final answer is rendered as
Markdown. When stdout is not a terminal only final answers are printed, one block per reply. Only
this channel reads stdin (architecture §7); end of input ends its :meth:`serve` once the running
answer is delivered, and so does a reader of stdout that went away (``EPIPE``).

Input: when stdin and stdout are both terminals, a banner greets the user and each line is read
with GNU readline behind a ``you>`` prompt that readline itself draws, so line editing (Ctrl-U,
Backspace at the start, Ctrl-L, history recall) redraws the prompt instead of erasing it; its
colour codes are wrapped in readline's ``\\001``/``\\002`` markers so they take no width. Otherwise
(piped input) there is no banner and no prompt: each line of stdin is one message. ``/help`` is
answered here, with every command and key; any other ``/word`` that is not a command of the bot is
answered "unknown command" instead of going to the model (``//text`` sends ``/text``).

Stopping (architecture §3 "Stop"): at a terminal, the lines typed while an answer runs are read at
once (the terminal's own line editing, no prompt): ``/stop`` goes to the bot then, the others wait
until the answer is over. Ctrl-C (SIGINT, which the daemon offers to :meth:`interrupt` first) is
``/stop`` while an answer runs; a second Ctrl-C within :data:`QUIT_WINDOW_SECS`, or one at an empty
prompt, quits (the daemon stops as for SIGTERM); one at a prompt holding text only arms the second.
Input is read in daemon threads of the channel's own: one blocked in ``input()`` when the daemon
stops does not keep the process alive, and :meth:`stop` puts the terminal's modes back as they were
before readline changed them.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import sys
import termios
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import IO, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from rich.console import Console
from rich.live import Live
from rich.text import Text

from channels.base import (
    UNSPACED,
    Channel,
    InboundHandler,
    InboundMessage,
    MessageRef,
    Rendering,
    WriteSpacing,
)
from channels.console.commands import is_stop, local_answer
from channels.console.input import (
    Question,
    in_daemon_thread,
    isatty,
    line_buffer,
    no_echo,
    read_typed_line,
    start_daemon_thread,
)
from channels.console.kind import KIND, ConsoleChannelConfig
from channels.console.view import is_status, live_view, renderable, rendered_form, unprinted

__all__ = ["QUIT_WINDOW_SECS", "ConsoleChannel"]

log = logging.getLogger(__name__)

CHAT_ID = "console"
QUIT_WINDOW_SECS = 2.0
"""A second Ctrl-C within this many seconds of the first quits, answer running or not."""

_PLAIN_PROMPT = "you> "
_COLOUR_PROMPT = "\001\033[1;36m\002you>\001\033[0m\002 "
"""Bold cyan ``you>``; readline gives no width to what is between ``\\001`` and ``\\002``
(RL_PROMPT_START_IGNORE, RL_PROMPT_END_IGNORE), so it redraws the prompt in the right place."""


class ConsoleChannel(Channel):
    limits = KIND.limits

    def __init__(
        self,
        name: str,
        config: ConsoleChannelConfig,
        on_inbound: InboundHandler,
        *,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name, config, on_inbound)
        self._clock = clock  # seconds, for the quit window of Ctrl-C
        self._stdin = stdin or sys.stdin
        out = stdout or sys.stdout
        self._interactive = out.isatty()
        # Banner, prompt and line editing need a person at a terminal on both ends.
        self._prompting = self._interactive and isatty(self._stdin)
        self._reading: Future[str | None] | None = None  # a line being read, see _next_line
        self._console = Console(file=out, highlight=False)
        self._messages: dict[str, tuple[str, bool]] = {}  # id -> (text, formatted)
        self._order: list[str] = []
        self._printed: dict[str, list[str]] = {}  # per message, what an approval prompt pushed up
        self._next_id = 0
        self._live: Live | None = None
        self._reply_done = anyio.Event()
        self._pending = 0  # messages passed on whose reply_finished has not come yet
        self._last_interrupt: float | None = None  # self._clock() at the last Ctrl-C
        self._at_prompt = False  # input() shows the prompt
        self._question: Question | None = None  # an approval question typed lines answer
        self._tty_modes: list[Any] | None = None  # the terminal's modes before readline's
        self._user = _user_name()
        self._rendered: tuple[int, str, Rendering] | None = None  # (width, text, rendering)
        self.output_gone = False  # stdout's reader went away, or a full disk: serve ends

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._prompting:
            import readline  # noqa: F401 - line editing and history for input()

            try:
                self._tty_modes = termios.tcgetattr(self._stdin.fileno())
            except (OSError, ValueError, termios.error):
                self._tty_modes = None
            self._console.print(
                f"[bold]relaybot[/] — console channel [dim]{self.name}[/]. "
                "Type a message; /help lists commands and keys; Ctrl-D quits.",
            )

    async def stop(self) -> None:
        self._stop_live()
        if self._at_prompt:  # quit at the prompt: the shell's prompt starts on a line of its own
            self._at_prompt = False
            self._console.file.write("\n")
            self._console.file.flush()
        if self._tty_modes is not None:
            # readline changes the modes while it reads (no echo, no line buffering); when the
            # daemon stops during input() nothing else would put them back.
            try:
                termios.tcsetattr(self._stdin.fileno(), termios.TCSADRAIN, self._tty_modes)
            except (OSError, ValueError, termios.error):
                pass

    async def serve(self) -> None:
        """Read lines until end of input; each line is one message, and the next one is sent
        once its reply is over. At a terminal the lines typed meanwhile are read at once:
        ``/stop`` goes to the bot then, the others wait for their turn."""
        held: deque[str | None] = deque()  # typed during an answer; None: the input ended
        while not self.output_gone:  # nobody reads the answers: the input ends here too
            line = held.popleft() if held else await self._next_line()
            if line is None:
                return
            text = line.strip()
            if not text:
                continue
            if text.startswith("//"):
                text = text[1:]
            elif (local := local_answer(text)) is not None:
                self._print_local(local)
                continue
            await self._pass_on(text)
            if self._prompting:
                await self._follow_reply(held)
            else:
                await self._reply_done.wait()

    async def reply_finished(self, chat_id: str) -> None:
        # A message that started no reply of its own (``/stop``) ends none: the reply is over
        # when every message passed on has had its reply_finished.
        self._pending = max(0, self._pending - 1)
        if self._pending == 0:
            self._end_reply()
            self._reply_done.set()

    async def interrupt(self) -> bool:
        """Ctrl-C: ``/stop`` while an answer runs (True); False (the daemon stops) for a second
        Ctrl-C within :data:`QUIT_WINDOW_SECS` or one at an empty prompt. One at a prompt that
        holds text is taken (True) and only arms the second."""
        now = self._clock()
        last, self._last_interrupt = self._last_interrupt, now
        if last is not None and now - last < QUIT_WINDOW_SECS:
            return False
        if self._pending:
            await self._pass_on("/stop")
            return True
        return self._at_prompt and bool(line_buffer())

    async def _pass_on(self, text: str) -> None:
        """Give ``text`` to the bot as a message; the first one since the last reply ended
        starts a new reply on the screen."""
        if self._pending == 0:
            self._reply_done = anyio.Event()
            self._begin_reply()
        self._pending += 1
        self._next_id += 1
        await self._on_inbound(_inbound(self.name, self._user, text, f"in-{self._next_id}"))

    async def _follow_reply(self, held: deque[str | None]) -> None:
        """Wait for the reply to end, reading the lines typed meanwhile into ``held``
        (``/stop`` is passed on at once; a pending approval question takes the next line)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read_typed, held)
            await self._reply_done.wait()
            tg.cancel_scope.cancel()

    async def _read_typed(self, held: deque[str | None]) -> None:
        fd = self._stdin.fileno()
        with no_echo(fd):
            await self._read_typed_lines(fd, held)

    async def _read_typed_lines(self, fd: int, held: deque[str | None]) -> None:
        while True:
            line = await self._typed_line(fd, held)
            if line is None:
                held.append(None)
                if self._question is not None:  # no answer will come: not approved
                    self._question.answer("")
                return
            text = line.strip()
            self._show_typed(text)
            if is_stop(text):
                await self._pass_on("/stop")
            elif self._question is not None:
                self._question.answer(text)
            elif text:
                held.append(line)

    def _show_typed(self, text: str) -> None:
        """A line typed during an answer, shown once it is complete: the terminal does not
        echo it (:func:`no_echo`), since an echo below the live region would put the cursor
        a line lower than the region's redraw assumes and leave a stale line of it on screen.
        Above the live region while it shows; after an approval prompt, as typed."""
        if not self._interactive or not text:
            return
        if self._live is not None:
            self._console.print(Text(f"you> {text}", style="dim"))
        else:
            self._console.print(Text(text))

    async def _typed_line(self, fd: int, held: deque[str | None]) -> str | None:
        """One line typed at the terminal (its line discipline edits it), or None at end of
        input. Cancelled, it waits for its thread to end (at most
        :data:`~channels.console.input.TYPED_POLL_SECS`) so that the prompt's ``input()`` never
        reads beside it; a line the thread read meanwhile goes to ``held``."""
        stop = threading.Event()
        box: list[str | None] = []

        def read() -> None:
            box.append(read_typed_line(fd, stop))

        done = start_daemon_thread(read)
        try:
            await done.wait()
        finally:
            if not done.is_set():
                stop.set()
                with anyio.CancelScope(shield=True):
                    await done.wait()
                if box and box[0] is not None:
                    held.append(box[0])
        return box[0] if box else None

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
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        if not self._prompting:
            return None
        self._print_above_prompt()
        seconds = f"{self.approval_timeout_secs:g}"
        self._console.print(f"[yellow]{prompt}[/] [dim](y/N, {seconds} s)[/]")
        with anyio.move_on_after(self.approval_timeout_secs):
            if self._pending:  # the reader of typed lines runs: it takes the answer
                question = self._question = Question()
                try:
                    await question.answered.wait()
                finally:
                    self._question = None
                answer: str | None = question.text
            else:
                answer = await self._next_line()
            return answer is not None and answer.strip().lower() in ("y", "yes")
        self._console.print("[dim]⌛ No answer: not approved[/]")
        return None

    async def _next_line(self) -> str | None:
        """The next line of input (None at its end). A read the caller stopped waiting for (an
        approval prompt that timed out) goes on in its daemon thread; its line is the next one
        returned, so no line typed is lost and no two reads race for the terminal."""
        if self._reading is None:
            reading: Future[str | None] = Future()

            def read() -> None:
                try:
                    reading.set_result(self._read_line())
                except BaseException as exc:  # handed to the waiting task
                    reading.set_exception(exc)

            start_daemon_thread(read)
            self._reading = reading
        line = await in_daemon_thread(self._reading.result)
        self._reading = None
        return line

    # -- rendering ------------------------------------------------------------------------

    def render(self, text: str) -> Rendering:
        """The final form of ``text``: its Markdown as rich renders it (without colours); a
        terminal has no length limit, so its length is that of ``text``. The last text's
        rendering is kept: delivery lays the final text out and the outbound policy checks it
        as it displays, one rendering for both (it costs about its length: a 1 MB answer's
        takes seconds)."""
        width = self._console.width
        last = self._rendered
        if last is not None and last[0] == width and last[1] == text:
            return last[2]
        rendering = Rendering(rendered_form(text, width), len(text))
        self._rendered = (width, text, rendering)
        return rendering

    @property
    def shows_formatting(self) -> bool:
        """Only at a terminal: piped, every text is printed as it is (:meth:`_end_reply`)."""
        return self._interactive

    def visible_text(self, text: str) -> str:
        """What the terminal shows of ``text``: its rich rendering; when stdout is no terminal,
        ``text`` itself (printed as it is: :meth:`_end_reply`)."""
        if not self._interactive:
            return text
        return self.render(text).form

    def _read_line(self) -> str | None:
        """One line of input, or None at its end (Ctrl-D at an empty prompt), or once the
        terminal is gone (closed: its reads fail with ``EIO``), which ends the channel as the
        end of input does instead of starting it again on a terminal nobody can type into."""
        if self._prompting:
            coloured = self._console.color_system is not None and not self._console.no_color
            prompt = _COLOUR_PROMPT if coloured else _PLAIN_PROMPT
            self._at_prompt = True
            try:
                return input(prompt)  # readline draws the prompt: editing keeps it in place
            except EOFError:
                with contextlib.suppress(OSError):  # the shell's prompt on a line of its own
                    self._console.file.write("\n")
                    self._console.file.flush()
                return None
            except OSError:
                return None
            finally:
                self._at_prompt = False
        try:
            line = self._stdin.readline()
        except OSError:
            return None
        return line or None

    def _print_local(self, text: str) -> None:
        """Print an answer made here (``/help``, an unknown command), not by the bot."""
        if self._prompting:
            self._console.print(Text(text))
        else:
            self._print_plain(text)

    def _print_plain(self, text: str) -> None:
        """Print ``text`` as it is (stdout is no terminal). Once stdout's reader went away
        (``| head``: ``EPIPE``), or it cannot be written (a full disk: one error line), nothing
        more is printed and :meth:`serve` ends as at the end of its input (architecture §7)."""
        if self.output_gone:
            return
        try:
            self._console.file.write(text + "\n")
            self._console.file.flush()
        except OSError as exc:
            self.output_gone = True
            if isinstance(exc, BrokenPipeError):
                log.info("console %s: the reader of stdout went away; ending", self.name)
            else:
                log.error("console %s: stdout cannot be written: %s", self.name, exc.strerror)

    def _begin_reply(self) -> None:
        self._messages.clear()
        self._order.clear()
        self._printed.clear()

    def _unprinted(self, message_id: str) -> str:
        return unprinted(self._messages[message_id][0], self._printed.get(message_id))

    def _shown(self) -> tuple[str, bool]:
        """The reply's text on the screen (after what was printed above a prompt) and whether
        it shows formatted (every part of it is)."""
        parts = [(self._unprinted(i), self._messages[i][1]) for i in self._order]
        text = "\n\n".join(t for t, _ in parts if t)
        return text, bool(parts) and all(formatted for _, formatted in parts)

    def _print_above_prompt(self) -> None:
        """Before an approval prompt: the reply so far is printed for good, without its tool
        status lines (the prompt says what is pending; the lines show on, finished, below)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        shown: list[str] = []
        for message_id in self._order:
            paragraphs = self._unprinted(message_id).split("\n\n")
            while paragraphs and is_status(paragraphs[-1]):
                paragraphs.pop()
            paragraphs = [p for p in paragraphs if p]
            if not paragraphs:
                continue
            self._printed[message_id] = [*self._printed.get(message_id, []), *paragraphs]
            shown.append("\n\n".join(paragraphs))
        if shown:
            text = "\n\n".join(shown)
            formatted = all(self._messages[i][1] for i in self._order)
            self._console.print(renderable(text, formatted))

    def _refresh(self) -> None:
        if not self._interactive:
            return
        if self._live is None:
            # transient: the live region is cleared at the end and the whole answer printed.
            self._live = Live(
                live_view(self._console, *self._shown()),
                console=self._console,
                auto_refresh=False,
                transient=True,
            )
            self._live.start()
        self._live.update(live_view(self._console, *self._shown()), refresh=True)

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
            if self._order:
                self._console.print(renderable(*self._shown()))

    def _end_reply(self) -> None:
        if self._interactive:
            self._stop_live()
        elif self._order:
            self._print_plain("\n\n".join(self._messages[i][0] for i in self._order))
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
