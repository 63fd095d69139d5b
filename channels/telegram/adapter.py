"""The Telegram channel (``kind: telegram``) on python-telegram-bot v22 (architecture §3).

Theory of operation
-------------------
The adapter executes primitive writes; the delivery engine decides what to write and when.

* **Transport.** One PTB ``Application``: long polling, or PTB's webhook server when ``webhook``
  is set; ``base_url`` passes through (a self-hosted Bot API server works). PTB's
  ``AIORateLimiter`` keeps the global limits with ``max_retries=0``, so every ``RetryAfter``
  reaches the engine, which honours it exactly (architecture §3 "Network errors").
* **Start.** ``Application.initialize`` calls getMe; a rejected token or an unreachable server
  is a :class:`ChannelStartError` with a one-line cause, never the token. The commands of
  :data:`~channels.base.COMMAND_MENU` are registered with setMyCommands and reach the
  orchestrator as ordinary texts (``/reset@this_bot`` as ``/reset``).
* **Threads.** A message in a forum topic (``is_topic_message``) carries its
  ``message_thread_id`` as :attr:`InboundMessage.thread_id`; sends, typing and approval prompts
  pass it back, so the reply stays in the topic.
* **Writes.** One platform write per call, no splitting and no waiting: the delivery engine
  decides every message boundary with :meth:`TelegramChannel.render` and honours every
  ``RetryAfter`` itself (architecture §1, §3). Previews are plain. A formatted write sends the
  model's Markdown as visible text + entities (:mod:`channels.telegram.format`); one whose
  rendering is longer than a message is refused as :class:`MessageTooLong` before any request.
  "can't parse entities" fails the write (:class:`ChannelWriteFailed`): the engine writes that
  one message again plain, an interval later (architecture §3 "Spacing"). A 5xx answer or a refused
  connection is :class:`~channels.errors.ChannelUnavailable` (it did not land).
* **Errors** match the description case-insensitively by prefix (PTB capitalises it, Telegram
  appends details): :func:`translate_error`.
* **Inbound** (:mod:`channels.telegram.inbound`). Texts, photos, image documents and albums
  become :class:`InboundMessage` (``is_direct``: a private chat; ``mentions_bot``: @mentioned
  in the text or caption, ``/cmd@bot`` or a reply to the bot; images as ``attachments``,
  downloaded from ``base_file_url``; ``update_ids`` for the orchestrator's dedupe). The
  orchestrator applies ``allowed_users`` and ``respond_in_groups``. Updates are handled one
  at a time, so the inbound handler must return quickly (the orchestrator queues).
* **Health.** getUpdates goes through a watched request object: while it fails (409 Conflict
  when another instance polls, 5xx, unreachable) :meth:`TelegramChannel.health` is
  ``degraded`` with the reason, and ``/healthz`` answers 503.
* **Approvals.** A prompt with ✅/❌ buttons; a press by an allowed user in that chat whom the
  orchestrator lets answer (the asker or an admin, :meth:`Channel.control`) is answered
  (answerCallbackQuery) and resolves the wait; another is refused in the callback's answer.
  After ``approval_timeout_secs`` the answer is ``None``. The prompt is then edited to show the
  outcome, without buttons.
* **Answer buttons** (:mod:`channels.telegram.buttons`). While an answer streams, each of its
  messages carries a ⏹ Stop inline keyboard (sends and edits); when it is delivered the keyboard
  goes and its last message gets 🔄 Regenerate, taken from the answer before: the writes after
  the model work ended carry it, and editMessageReplyMarkup fixes what they did not. A press
  is handed to the orchestrator as a :class:`~channels.controls.ControlEvent` and answered
  (answerCallbackQuery) with its refusal, or "Stopping…" / "Asking again…".
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
from telegram import (
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputFile,
    Message,
    MessageEntity,
    ReplyParameters,
    Update,
    User,
)
from telegram.constants import ChatAction
from telegram.error import (
    InvalidToken,
    NetworkError,
    TelegramError,
    TimedOut,
)
from telegram.ext import AIORateLimiter, Application, ApplicationBuilder, ContextTypes, TypeHandler

from channels.base import (
    COMMAND_MENU,
    UNSPACED,
    Channel,
    ChannelHealth,
    InboundHandler,
    MessageRef,
    Rendering,
    WriteSpacing,
)
from channels.base import utf16_len as _utf16_len
from channels.errors import ChannelStartError, ChannelWriteFailed, MessageTooLong
from channels.telegram.buttons import AnswerButtons
from channels.telegram.controls import APPROVAL_PREFIX, TelegramButtons
from channels.telegram.errors import quiet_rate_limiter_log, translate_error
from channels.telegram.format import FormattedText, markdown_to_telegram, to_html
from channels.telegram.inbound import InboundReader, PollHealth, file_base_url
from channels.telegram.kind import KIND, TelegramChannelConfig

__all__ = ["COMMANDS", "TelegramChannel", "TelegramTimeouts"]

_LOG = logging.getLogger("channels.telegram")
_T = TypeVar("_T")

COMMANDS = tuple(BotCommand(name, description) for name, description, _ in COMMAND_MENU)
_UPDATES = ["message", "callback_query"]


@dataclass(frozen=True, slots=True)
class TelegramTimeouts:
    """HTTP bounds of Bot API calls, in seconds (PTB's ``HTTPXRequest``; reads default to 5 s).

    ``long_poll_secs`` is getUpdates' ``timeout``; PTB adds it to the read bound of that call.
    """

    connect_secs: float = 5.0
    read_secs: float = 5.0
    write_secs: float = 5.0
    pool_secs: float = 1.0
    long_poll_secs: int = 10


def _thread(thread_id: str | None) -> int | None:
    """The ``message_thread_id`` of a write."""
    return int(thread_id) if thread_id is not None else None


def _entities(part: FormattedText) -> list[MessageEntity] | None:
    if not part.entities:
        return None
    return [MessageEntity(**e.to_dict()) for e in part.entities]  # type: ignore[arg-type]


@dataclass
class _Approval:
    chat_id: str
    thread_id: str | None
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: bool | None = None


class TelegramChannel(Channel, TelegramButtons):
    """A Telegram bot (see the module docstring).

    Args:
        name: the channel's key in the config.
        config: its :class:`TelegramChannelConfig`.
        on_inbound: awaited per inbound text message; must return quickly.
        timeouts: HTTP bounds (tests make them short).
    """

    limits = KIND.limits
    multi_message_unit = "turn"

    def __init__(
        self,
        name: str,
        config: TelegramChannelConfig,
        on_inbound: InboundHandler,
        *,
        timeouts: TelegramTimeouts | None = None,
    ) -> None:
        super().__init__(name, config, on_inbound)
        self.config: TelegramChannelConfig = config
        self.timeouts = timeouts or TelegramTimeouts()
        self.approval_timeout_secs: float = 120.0
        """How long :meth:`request_approval` waits for a press, in seconds."""
        self._app: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._me: User | None = None
        self._starting: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._approvals: dict[str, _Approval] = {}
        self._buttons = AnswerButtons()
        self._polling = PollHealth()
        self._reader = InboundReader(
            name,
            on_inbound,
            media_group_wait_ms=config.media_group_wait_ms,
            spawn=self._spawn,
            respond_in_groups=config.respond_in_groups,
        )

    def _spawn(self, work: Awaitable[None]) -> object:
        """Run ``work`` as a task of the PTB application (awaited when it stops)."""
        app = self._app or self._starting
        assert app is not None, "updates are handled only while the application runs"
        return app.create_task(work)

    def health(self) -> ChannelHealth:
        """``degraded`` while getUpdates fails (e.g. 409: another instance polls the bot)."""
        return self._polling.state

    # -- lifecycle ------------------------------------------------------------------------

    def _build(self) -> Application[Any, Any, Any, Any, Any, Any]:
        quiet_rate_limiter_log()
        builder = ApplicationBuilder().token(self.config.token.get_secret_value())
        builder.base_url(self.config.base_url).rate_limiter(AIORateLimiter(max_retries=0))
        builder.base_file_url(file_base_url(self.config.base_url, self.config.base_file_url))
        bounds: dict[str, float] = {}
        for kind in ("connect", "read", "write", "pool"):  # the same bounds for getUpdates
            seconds = bounds[f"{kind}_timeout"] = getattr(self.timeouts, f"{kind}_secs")
            getattr(builder, f"{kind}_timeout")(seconds)
        if self.config.proxy:  # every Bot API call, long polling included
            builder.proxy(self.config.proxy)
        # getUpdates goes through a request object of its own, watched for /healthz; it gets
        # the same bounds and proxy (PTB refuses get_updates_* settings beside it).
        polling = self._polling.request(**bounds, proxy=self.config.proxy or None)
        builder.get_updates_request(polling)
        return builder.build()

    def _start_failure(self, exc: BaseException) -> str:
        host = urlsplit(self.config.base_url).netloc or self.config.base_url
        if isinstance(exc, InvalidToken):
            cause = str(exc.__cause__ or "rejected").strip()
            code = {"unauthorized": "401 ", "not found": "404 "}.get(cause.lower(), "")
            return f"invalid token ({code}{cause})"
        if isinstance(exc, TimedOut):
            return f"the Bot API server at {host} did not answer in time"
        if isinstance(exc, NetworkError):
            return f"cannot reach the Bot API server at {host}: {exc}"
        if isinstance(exc, OSError) and self.config.webhook is not None:
            return f"cannot listen for the webhook on {self.config.webhook.listen}: {exc}"
        message = f"the Bot API server at {host} refused to start the bot: {exc}"
        return message.replace(self.config.token.get_secret_value(), "<token>")

    async def start(self) -> None:
        """getMe, setMyCommands, then polling or the webhook server.

        Raises:
            ChannelStartError: the token was rejected, the server is unreachable, or the
                webhook server could not listen; the message is one line without the token.
        """
        if self._app is not None:
            return
        app = self._build()
        try:
            await app.initialize()
        except (TelegramError, OSError) as exc:
            with contextlib.suppress(Exception):
                await app.bot.shutdown()
            permanent = isinstance(exc, InvalidToken)  # a rejected token: no retry
            # PTB's text has the token
            raise ChannelStartError(self._start_failure(exc), permanent=permanent) from None
        self._me = app.bot.bot
        self._reader.me, self._reader.bot = self._me, app.bot
        self._reader.max_image_bytes = self.max_image_bytes
        self._reader.max_document_bytes = self.max_document_bytes
        self._reader.max_audio_bytes = self.max_audio_bytes
        self._starting = app
        try:
            await app.bot.set_my_commands(COMMANDS)
        except TelegramError as exc:
            _LOG.warning("%s: could not register the bot's commands: %s", self.name, exc)
        app.add_handler(TypeHandler(Update, self._on_update))
        app.add_error_handler(self._on_handler_error)
        await app.start()
        try:
            await self._start_updates(app)
        except (TelegramError, OSError) as exc:
            await app.stop()
            await app.shutdown()
            raise ChannelStartError(self._start_failure(exc)) from None
        self._app, self._starting = app, None

    async def _start_updates(self, app: Application[Any, Any, Any, Any, Any, Any]) -> None:
        assert app.updater is not None
        hook = self.config.webhook
        if hook is None:
            await app.updater.start_polling(
                timeout=int(self.timeouts.long_poll_secs),
                allowed_updates=_UPDATES,
                error_callback=self._on_polling_error,
            )
            return
        host, _, port = hook.listen.rpartition(":")
        await app.updater.start_webhook(
            listen=host or "127.0.0.1",
            port=int(port),
            url_path=urlsplit(hook.url).path.lstrip("/"),
            webhook_url=hook.url,
            secret_token=hook.secret_token.get_secret_value() if hook.secret_token else None,
            allowed_updates=_UPDATES,
        )

    async def stop(self) -> None:
        """Stop receiving (polling or webhook), let running handlers finish, close HTTP."""
        app, self._app = self._app, None
        if app is None:
            return
        try:
            if app.updater is not None and app.updater.running:
                await app.updater.stop()
            if app.running:
                await app.stop()
        finally:
            await app.shutdown()

    def _on_polling_error(self, exc: TelegramError) -> None:
        _LOG.warning("%s: getUpdates failed (PTB retries): %s", self.name, exc)

    async def _on_handler_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        _LOG.error("%s: handling an update failed", self.name, exc_info=context.error)

    # -- inbound --------------------------------------------------------------------------

    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if update.callback_query is not None:
            await self._on_callback(update.callback_query)
        elif update.message is not None:
            await self._reader.on_message(update.message, update.update_id)

    def _allowed(self, user: User) -> bool:
        """``allowed_users`` for button presses (the orchestrator never sees them)."""
        names = {str(a).lower().removeprefix("@") for a in self.config.allowed_users}
        candidates = {str(user.id), (user.username or "").lower()} - {""}
        return "*" in names or bool(names & candidates)

    # -- primitives -----------------------------------------------------------------------

    def _bot(self) -> Any:
        if self._app is None:
            raise ChannelWriteFailed(f"channel {self.name!r} is not started")
        return self._app.bot

    @staticmethod
    async def _call(action: Callable[[], Awaitable[_T]], *, length: int = 0) -> _T:
        try:
            return await action()
        except TelegramError as exc:
            raise translate_error(exc, length=length) from exc

    def _formatted(self, text: str) -> FormattedText:
        """``text`` rendered; one message or :class:`MessageTooLong` (the engine measured it
        with :meth:`render`, so this only fires when a caller did not)."""
        rendered = markdown_to_telegram(text)
        if rendered.utf16_length > self.limits.max_length:
            raise MessageTooLong(self.limits.max_length, rendered.utf16_length)
        return rendered

    @property
    def can_send_voice(self) -> bool:
        return True

    async def _send_voice(
        self,
        chat_id: str,
        audio: bytes,
        mime_type: str,
        *,
        reply_to: str | None,
        thread_id: str | None,
    ) -> MessageRef:
        """``sendVoice`` (https://core.telegram.org/bots/api#sendvoice: OGG/Opus, MP3 or M4A
        are shown as a voice note), the bytes as they are."""
        bot = self._bot()
        reply = None
        if reply_to is not None:
            reply = ReplyParameters(int(reply_to), allow_sending_without_reply=True)
        sent: Message = await self._call(
            lambda: bot.send_voice(
                chat_id,
                InputFile(audio, filename="answer.ogg", attach=False),
                reply_parameters=reply,
                message_thread_id=_thread(thread_id),
            ),
            length=0,
        )
        return MessageRef(chat_id, str(sent.message_id))

    async def _send_message(
        self,
        chat_id: str,
        text: str,
        *,
        formatted: bool,
        reply_to: str | None,
        thread_id: str | None = None,
    ) -> MessageRef:
        bot = self._bot()
        topic = _thread(thread_id)
        reply = None
        if reply_to is not None:
            reply = ReplyParameters(int(reply_to), allow_sending_without_reply=True)
        if formatted:
            part = self._formatted(text)
            text, entities, length = part.text, _entities(part), part.utf16_length
        else:
            entities, length = None, _utf16_len(text)
        keyboard = self._buttons.markup_for(chat_id, thread_id, None)
        sent: Message = await self._call(
            lambda: bot.send_message(
                chat_id,
                text,
                entities=entities,
                reply_parameters=reply,
                message_thread_id=topic,
                reply_markup=keyboard,
            ),
            length=length,
        )
        if keyboard is not None:
            self._buttons.written(chat_id, thread_id, str(sent.message_id), sent=True)
        return MessageRef(chat_id, str(sent.message_id))

    async def _edit_message(self, ref: MessageRef, text: str, *, formatted: bool) -> None:
        bot = self._bot()
        if formatted:
            part = self._formatted(text)
            text, entities, length = part.text, _entities(part), part.utf16_length
        else:
            entities, length = None, _utf16_len(text)
        keyboard = self._buttons.markup_for(ref.chat_id, None, ref.message_id)
        await self._call(
            lambda: bot.edit_message_text(
                text, ref.chat_id, int(ref.message_id), entities=entities, reply_markup=keyboard
            ),
            length=length,
        )
        if keyboard is not None:
            self._buttons.written(ref.chat_id, None, ref.message_id, sent=False)
        else:
            self._buttons.unmarked(ref.chat_id, ref.message_id)

    async def _delete_message(self, ref: MessageRef) -> None:
        bot = self._bot()
        await self._call(lambda: bot.delete_message(ref.chat_id, int(ref.message_id)))
        self._buttons.deleted(ref.chat_id, ref.message_id)

    async def _send_typing(self, chat_id: str, *, thread_id: str | None = None) -> None:
        bot = self._bot()
        topic = _thread(thread_id)
        await self._call(
            lambda: bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=topic)
        )

    async def _request_approval(
        self,
        chat_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        spacing: WriteSpacing = UNSPACED,
    ) -> bool | None:
        """Raises ChannelError when the prompt cannot be sent."""
        bot = self._bot()
        token = secrets.token_urlsafe(9)
        data = f"{APPROVAL_PREFIX}{token}"
        yes = InlineKeyboardButton("✅ Approve", callback_data=f"{data}:y")
        no = InlineKeyboardButton("❌ Deny", callback_data=f"{data}:n")
        buttons = InlineKeyboardMarkup([[yes, no]])
        approval = self._approvals[token] = _Approval(chat_id, thread_id)
        try:
            sent: Message = await self._call(
                lambda: bot.send_message(
                    chat_id, prompt, reply_markup=buttons, message_thread_id=_thread(thread_id)
                ),
                length=_utf16_len(prompt),
            )
            spacing.landed()
            with anyio.move_on_after(self.approval_timeout_secs):
                await approval.answered.wait()
        finally:
            del self._approvals[token]
        outcome = {True: "✅ Approved", False: "❌ Denied", None: "⌛ No answer: not approved"}
        try:  # show the outcome and remove the buttons; the answer stands either way
            await spacing.next_write()
            await bot.edit_message_text(
                f"{prompt}\n\n{outcome[approval.answer]}", chat_id, sent.message_id
            )
            spacing.landed()
        except TelegramError as exc:
            _LOG.warning("%s: could not update the approval prompt: %s", self.name, exc)
        return approval.answer

    def visible_text(self, text: str) -> str:
        """The visible text of ``text`` sent formatted: Telegram shows ``text`` without its
        entities."""
        return markdown_to_telegram(text).text

    def render(self, text: str) -> Rendering:
        """The final form of ``text``: its visible text when Markdown left no formatting, else
        Telegram HTML of text + entities (canonical: for equality checks); its length in UTF-16
        code units of the visible text (what the 4096 limit counts)."""
        rendered = markdown_to_telegram(text)
        form = to_html(rendered) if rendered.entities else rendered.text
        return Rendering(form, rendered.utf16_length)
