"""Answering one inbound message (architecture §5): a command (``/start`` says hello,
``/help`` lists the commands, ``/reset`` or its alias ``/new`` forgets the conversation, the
controls' ``/model``, ``/system``, ``/settings``, ``/status`` and ``/usage``, ``/regenerate``
asks the last question again), or a turn of its conversation after its images and documents
are screened, its voice note transcribed and its sender's and chat's limits checked; then the
answer also spoken when ``speech.reply`` asks, the reply's log line and metrics.
``/stop`` cuts the conversation's running answer short (architecture §3 "Stop"). Notices to a
chat (:meth:`Answering.say`) go through the outbound policy."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol, runtime_checkable

import anyio

from channels.base import Channel, InboundMessage
from channels.errors import ChannelError
from config.models import RelaybotConfig
from orchestrator.chats.commands import CONTROL_COMMANDS, ChatCommands
from orchestrator.chats.reruns import LastQuestions, reruns
from orchestrator.chats.roles import Roles
from orchestrator.controls.gate import limit_refusal
from orchestrator.metrics import Metrics
from orchestrator.policy import OutboundPolicy
from orchestrator.store import ConversationStore, WaitingMessage
from orchestrator.turn.documents import screen_documents
from orchestrator.turn.images import screen_images
from orchestrator.turn.reply_stats import ReplyStats
from orchestrator.turn.runner import SHUTDOWN_CAUSE, TurnRunner, conversation_key
from orchestrator.turn.voice import (
    NO_SPEECH,
    NOTHING_HEARD,
    TRANSCRIPTION_FAILED,
    audio_refusal,
    heard_text,
    speaks,
    transcript_line,
)
from providers.base import DocumentPart
from providers.errors import ProviderError
from providers.speech import SPEECH_FORMAT, SpeechClient

__all__ = [
    "HELP_TEXT",
    "NOTHING_TO_REGENERATE",
    "NOTHING_TO_STOP",
    "RESET_COMMANDS",
    "STALE_NOTICE",
    "START_TEXT",
    "TRIM_NOTICE",
    "Answering",
    "AnswersRefusals",
    "ReportsUsage",
    "command_of",
    "stale_notice",
]

log = logging.getLogger("orchestrator.ops.daemon")  # the reply lines keep their logger name

START_TEXT = "Hi! Send me a message and I will answer. /help lists the commands."
HELP_TEXT = (
    "Commands:\n"
    "/stop: end the answer being written\n"
    "/reset or /new: forget this conversation and start a new one\n"
    "/regenerate: answer the last question again\n"
    "/model: list the models; /model NAME switches this chat to one\n"
    "/system TEXT: this chat's system prompt; /system reset restores it\n"
    "/settings: this chat's model and system prompt\n"
    "/status: model, context fill, tokens today\n"
    "/usage: your and this chat's tokens and cost\n"
    "/help: this list\n"
    "Anything else is a message to the model."
)
RESET_COMMANDS = frozenset({"/reset", "/new"})
"""``/new`` is an alias of ``/reset`` (the name other chat bots use)."""
NOTHING_TO_STOP = "Nothing to stop."
NOTHING_TO_REGENERATE = "Nothing to regenerate: this conversation has no question yet."
REGENERATE = "/regenerate"
TRIM_NOTICE = "Older messages of this chat are no longer sent to the model; /reset starts afresh."
TRIM_NOTICE_STATE = "trim_noticed:"
"""The channel-state key prefix (then ``chat_id`` and ``:thread_id``) of a conversation told
:data:`TRIM_NOTICE`: it is told once, until ``/reset``."""
STALE_NOTICE = (
    "Your message from {when} was not answered before the bot restarted; please send it again."
)


@runtime_checkable
class ReportsUsage(Protocol):
    """A channel that tells its client what a reply used (the OpenAI-compatible API): told
    before :meth:`~channels.base.Channel.reply_finished`, with the tokens the providers
    reported (0 where none did)."""

    async def reply_usage(self, chat_id: str, input_tokens: int, output_tokens: int) -> None: ...


@runtime_checkable
class AnswersRefusals(Protocol):
    """A channel whose client is told a limit's refusal otherwise than by a message (the
    OpenAI-compatible API: an HTTP 429): told before
    :meth:`~channels.base.Channel.reply_finished`, with the refusal's line and when its cap
    resets (Unix seconds)."""

    async def reply_refused(self, chat_id: str, line: str, resets_at: float) -> None: ...


class Answering:
    """Answers inbound messages, one call per message (the dispatcher runs one at a time per
    conversation).

    Args:
        config: the current config (read at each message: a reload may replace it).
        store: the conversation store.
        policy: the outbound policy (notices are redacted by it).
        turns: runs a conversation's turn.
        metrics: where replies are counted.
        vision: whether the provider chain accepts images (read at each message).
        stats: the per-reply totals of rounds, for the reply's log line.

    Attributes:
        active: turns running now.
        unanswered: the cause of the first answer that could not be produced (``None``: none).
    """

    def __init__(
        self,
        config: Callable[[], RelaybotConfig],
        store: ConversationStore,
        policy: OutboundPolicy,
        turns: TurnRunner,
        metrics: Metrics,
        vision: Callable[[], bool],
        stats: ReplyStats,
    ) -> None:
        self._config = config
        self._store = store
        self._policy = policy
        self._turns = turns
        self._metrics = metrics
        self._vision = vision
        self._stats = stats
        self.active = 0
        self.unanswered: str | None = None
        self._commands = ChatCommands(config, store, turns)
        self._last_questions = LastQuestions()

    async def say(
        self, channel: Channel, message: InboundMessage, text: str, *, reply: bool = False
    ) -> None:
        """A short notice in the message's chat and thread (redacted; failures logged), with
        ``reply`` as an answer to it."""
        try:
            await channel.send_message(
                message.chat_id,
                self._policy.redact(text),
                reply_to=message.message_id if reply else None,
                thread_id=message.thread_id,
            )
        except ChannelError as exc:
            log.warning("channel %s: could not send a notice: %s", channel.name, exc)

    async def _command(self, channel: Channel, message: InboundMessage, command: str) -> None:
        if command in RESET_COMMANDS:
            await self._store.reset(channel.name, message.chat_id, message.thread_id)
            self._last_questions.forget((channel.name, message.chat_id, message.thread_id))
            key = _trim_key(message)
            if await self._store.get_state(channel.name, key):
                await self._store.set_state(channel.name, key, "")
            text = "Conversation cleared."
        else:
            text = HELP_TEXT if command == "/help" else START_TEXT
        await self.say(channel, message, text)

    async def stop(self, channel: Channel, message: InboundMessage) -> None:
        """``/stop``: cut the conversation's running answer short; say so when none runs. With
        a shared store the answer may run on another instance: the request goes to all."""
        key = conversation_key(channel.name, message)
        try:
            if self._turns.stop(key):
                return
            store = self._store
            if store.shared and await store.claimed(*key):
                await store.request_stop(*key)
            else:
                await self.say(channel, message, NOTHING_TO_STOP)
        finally:
            await channel.reply_finished(message.chat_id)

    async def run(self, channel: Channel, message: InboundMessage) -> None:
        """Answer ``message`` (a command, or a turn of its conversation), then tell the channel
        its reply is over."""
        self.active += 1
        began = time.monotonic()
        try:
            await self._answer(channel, message, began)
        finally:
            self.active -= 1

    async def _screen(
        self, channel: Channel, message: InboundMessage
    ) -> tuple[InboundMessage, tuple[DocumentPart, ...], bool] | None:
        """(the message to answer, its documents, whether it was a voice note), after its
        images and documents are screened and its voice note transcribed; None after the line
        saying why it is not answered (:mod:`orchestrator.turn.images`, ``.documents``,
        ``.voice``)."""
        agent = self._config().agent
        answered, notice = screen_images(
            message, max_bytes=agent.max_image_bytes, vision=self._vision()
        )
        if notice is not None:
            await self.say(channel, message, notice)
        if answered is None:
            return None
        documents, refused = screen_documents(
            answered, max_bytes=agent.max_document_bytes, max_pages=agent.max_document_pages
        )
        if refused is not None:
            await self.say(channel, answered, refused)
            return None
        voice_note = any(a.kind == "audio" for a in answered.attachments)
        heard = await self._hear(channel, answered) if voice_note else answered
        return None if heard is None else (heard, documents, voice_note)

    async def _answer(self, channel: Channel, message: InboundMessage, began: float) -> None:
        conversation = (channel.name, message.chat_id, message.thread_id)
        rerun = reruns(
            enabled=self._config().agent.rerun_edited,
            edited_id=message.message_id if message.edited else None,
            last_question_id=self._last_questions.last(conversation),
        )
        if message.edited and not rerun:
            log.debug("%s:%s: an edit, not answered again", channel.name, message.chat_id)
            with anyio.CancelScope(shield=True):
                await channel.reply_finished(message.chat_id)
            return
        screened = await self._screen(channel, message)
        if screened is None:
            with anyio.CancelScope(shield=True):
                await channel.reply_finished(message.chat_id)
            return
        message, documents, voice_note = screened
        command = command_of(message.text, channel.command_prefix)
        if rerun and command is not None:
            command = None  # an edit into a command is asked as a question, never run
        if command in ("/start", "/help", *RESET_COMMANDS, *CONTROL_COMMANDS):
            try:
                if command in CONTROL_COMMANDS:
                    text = await self._commands.answer(channel, message, command)
                    await self.say(channel, message, text)
                else:
                    await self._command(channel, message, command)
            finally:
                with anyio.CancelScope(shield=True):
                    await channel.reply_finished(message.chat_id)
            return
        try:
            asked = await self._admitted(channel, message, command)
            if asked is None:
                return
            if asked is not message:  # /regenerate: the last question, without its files
                message, documents = asked, ()
            self._last_questions.answered(conversation, message.message_id)
            outcome = await self._turns.run(channel, message, documents)
            speech = self._config().speech
            if outcome.outcome == "ok" and outcome.answer.strip() and speech is not None:
                if speaks(speech.reply, voice_note=voice_note):
                    await self._speak(channel, message, outcome.answer)
            if outcome.dropped_messages:
                await self._tell_trimmed(channel, message)
            if outcome.outcome == "interrupted" and outcome.cause != SHUTDOWN_CAUSE:
                self.unanswered = self.unanswered or outcome.cause
            seconds = time.monotonic() - began
            self._metrics.observe_reply(channel.name, outcome.outcome, seconds)
            totals = self._stats.take(channel.name, message.chat_id, message.thread_id)
            if isinstance(channel, ReportsUsage):
                await channel.reply_usage(
                    message.chat_id, totals.input_tokens, totals.output_tokens
                )
            fields = {
                "channel": channel.name,
                "chat": message.chat_id,
                "round": outcome.rounds,
                "outcome": outcome.outcome,
                "duration_ms": round(seconds * 1000),
                **totals.fields(),
            }
            if message.thread_id is not None:
                fields["thread"] = message.thread_id
            log.info(
                "reply in %s:%s: %s after %d round(s)",
                channel.name,
                message.chat_id,
                outcome.outcome,
                outcome.rounds,
                extra={"fields": fields},
            )
        finally:
            with anyio.CancelScope(shield=True):
                await channel.reply_finished(message.chat_id)

    async def _admitted(
        self, channel: Channel, message: InboundMessage, command: str | None
    ) -> InboundMessage | None:
        """The message to answer — for ``/regenerate`` the conversation's last question, its
        last exchange dropped from the history — or ``None`` when it is refused (said in one
        line): nothing to regenerate, or a limit reached (architecture §5 "Budgets")."""
        config = self._config()
        roles = Roles(getattr(channel.config, "admins", ()))
        refusal = await limit_refusal(
            self._store.controls, config.limits, roles, channel.name, message, time.time()
        )
        if refusal is not None:
            line = refusal.line
            log.info("%s:%s: refused by a limit: %s", channel.name, message.chat_id, line)
            if isinstance(channel, AnswersRefusals):
                await channel.reply_refused(message.chat_id, line, refusal.resets_at)
            else:
                await self.say(channel, message, line, reply=True)
            return None
        if message.edited:  # agent.rerun_edited: the edited last question replaces the old
            await self._store.controls.drop_last_turn(
                channel.name, message.chat_id, message.thread_id
            )
            await channel.answer_rerun(message.chat_id, message.thread_id)
            return message
        if command == REGENERATE:
            question = await self._store.controls.drop_last_turn(
                channel.name, message.chat_id, message.thread_id
            )
            if question is None:
                await self.say(channel, message, NOTHING_TO_REGENERATE)
                return None
            message = replace(message, text=question, message_id=None, attachments=())
        return message

    def _speech(self) -> SpeechClient | None:
        config = self._config()
        if config.speech is None:
            return None
        return SpeechClient(config.speech, config.providers[config.speech.provider])

    async def _hear(self, channel: Channel, message: InboundMessage) -> InboundMessage | None:
        """The voice note of ``message`` transcribed: the transcript shown to the user, quoted,
        and the message with it as its text; None after one line saying why not
        (:mod:`orchestrator.turn.voice`)."""
        audio = next(a for a in message.attachments if a.kind == "audio")
        agent, speech = self._config().agent, self._speech()
        refusal = audio_refusal(
            audio,
            configured=speech is not None,
            max_bytes=agent.max_audio_bytes,
            max_seconds=agent.max_audio_seconds,
        )
        if refusal is not None or speech is None:
            await self.say(channel, message, refusal or NO_SPEECH)
            return None
        try:
            transcript = await speech.transcribe(
                audio.data, file_name=audio.file_name or "voice.ogg", mime_type=audio.mime_type
            )
        except ProviderError as exc:
            log.warning("%s:%s: transcription failed: %s", channel.name, message.chat_id, exc)
            await self.say(channel, message, TRANSCRIPTION_FAILED)
            return None
        if not transcript:
            await self.say(channel, message, NOTHING_HEARD)
            return None
        await self.say(channel, message, transcript_line(transcript), reply=True)
        # The voice note stays attached: history keeps a note of it (orchestrator.turn.inputs).
        return replace(message, text=heard_text(message.text, transcript))

    async def _speak(self, channel: Channel, message: InboundMessage, answer: str) -> None:
        """The answer, redacted and as a reader sees it, also sent as a voice note (after the
        text; failures logged: the text was delivered)."""
        speech = self._speech()
        if speech is None or not channel.can_send_voice:
            return
        spoken = channel.visible_text(self._policy.redact(answer))
        try:
            audio = await speech.synthesize(spoken)
            await channel.send_voice(
                message.chat_id,
                audio,
                SPEECH_FORMAT[1],
                reply_to=message.message_id,
                thread_id=message.thread_id,
            )
        except (ProviderError, ChannelError) as exc:
            log.warning("%s:%s: no voice reply: %s", channel.name, message.chat_id, exc)

    async def _tell_trimmed(self, channel: Channel, message: InboundMessage) -> None:
        """Older messages no longer fit the model's context window: say so, once per
        conversation until ``/reset`` (architecture §5 "Context budget")."""
        key = _trim_key(message)
        if await self._store.get_state(channel.name, key):
            return
        await self._store.set_state(channel.name, key, "1")
        await self.say(channel, message, TRIM_NOTICE)


def _trim_key(message: InboundMessage) -> str:
    return f"{TRIM_NOTICE_STATE}{message.chat_id}:{message.thread_id or ''}"


def stale_notice(waiting: WaitingMessage) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(waiting.received_at))
    return STALE_NOTICE.format(when=when)


def command_of(text: str, prefix: str = "/") -> str | None:
    """``/reset@BotName args`` → ``/reset`` (and ``!reset`` → ``/reset`` with the channel's
    ``prefix`` ``!``); None when the text is not a command."""
    stripped = text.strip()
    if not stripped.startswith(("/", prefix)):
        return None
    if not stripped.startswith("/"):
        stripped = "/" + stripped[len(prefix) :]
    word = stripped.split()[0].split("@", 1)[0].lower()
    return word if len(word) > 1 else None
