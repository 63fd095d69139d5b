"""Marking the replies a dead writer left in flight (architecture §7 "Store", §9): a hard kill
is never invisible.

Theory of operation
-------------------
Every reply is recorded in the store (``drafts``, :class:`~orchestrator.store.Draft`) before its
first write, with its message ids and the last message's text as they are sent and edited, and
cleared when the reply ends (:class:`~orchestrator.turn.runner.TurnRunner`). A record still
there when no live writer holds the conversation is a reply cut by SIGKILL, a crash or power
loss. Whoever finds it calls :func:`mark_cut_answer`, one path for both stores:

* a store of one instance (SQLite): the daemon at start, for every record left
  (:func:`mark_cut_answers`), after the channels started and before any turn runs;
* a shared store (PostgreSQL): the instance that claims the conversation next
  (:mod:`orchestrator.chats.shared_queue`).

The last message gets ``⚠️ Answer interrupted: the bot instance writing it stopped`` after a
blank line (an edit); a reply cut before its first message landed gets the marker as a new
message answering the user's. The round is recorded ``interrupted`` and the record cleared. The
cut question is not asked again: its waiting row was taken when its turn started, and the
messages queued behind it — still waiting — are each answered once, in order.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from channels.base import Channel, MessageRef
from channels.errors import ChannelError
from orchestrator.delivery.planning import append_line, interrupted_marker
from orchestrator.store import ConversationStore, Draft, RoundRecord

__all__ = ["TAKEOVER_CAUSE", "ReplyJournal", "mark_cut_answer", "mark_cut_answers"]

log = logging.getLogger(__name__)

TAKEOVER_CAUSE = "the bot instance writing it stopped"
"""The cause the interrupted marker of a reply cut by its writer's death names."""


class ReplyJournal:
    """The store's record of one reply in flight, kept by its turn: :meth:`begin` before the
    first write, :meth:`written` after each send or edit that landed, :meth:`end` when the reply
    is over. A store that fails is logged and the reply goes on (a write that landed is never
    undone by a store hiccup).

    Args:
        store: where the record lives.
        channel: the channel's name.
        chat_id: the chat the reply goes to (it follows a chat that moved: the record then
            moves with the first write landing in the new chat).
        thread_id: the conversation's thread (``None``: none).
        reply_to: the user's message the reply answers (``None``: none).
    """

    def __init__(
        self,
        store: ConversationStore,
        channel: str,
        chat_id: str,
        thread_id: str | None,
        reply_to: str | None,
    ) -> None:
        self._store = store
        self._draft = Draft(channel, chat_id, thread_id, None, "", False, (), reply_to)

    @property
    def draft(self) -> Draft:
        """What the store holds (or was asked to hold) now."""
        return self._draft

    async def begin(self) -> None:
        """Record the reply as in flight, before its first write."""
        await self._keep()

    async def written(self, ref: MessageRef, text: str, formatted: bool) -> None:
        """A send or edit of ``ref`` landed, the message showing ``text``. A new message
        becomes the reply's last; an edit of an earlier one changes nothing recorded."""
        d = self._draft
        if ref.chat_id != d.chat_id:  # the chat moved: the reply goes on in the new one
            await self._clear()
            d = Draft(d.channel, ref.chat_id, d.thread_id, None, "", False, (), None)
        ids = d.message_ids
        if ref.message_id not in ids:
            ids = (*ids, ref.message_id)
        elif ref.message_id != d.message_id:
            return
        # Built directly (after every write that landed): ``dataclasses.replace`` costs more.
        self._draft = Draft(
            d.channel, d.chat_id, d.thread_id, ref.message_id, text, formatted, ids, d.reply_to
        )
        await self._keep()

    async def end(self) -> None:
        """The reply is over (delivered, given up, or ended with its marker): forget it."""
        await self._clear()

    async def _keep(self) -> None:
        try:
            await self._store.set_draft(self._draft)
        except Exception as exc:
            log.warning("could not record the reply in flight in %s: %s", _where(self._draft), exc)

    async def _clear(self) -> None:
        d = self._draft
        try:
            await self._store.clear_draft(d.channel, d.chat_id, d.thread_id)
        except Exception as exc:
            log.warning("could not forget the reply in flight in %s: %s", _where(d), exc)


async def mark_cut_answer(store: ConversationStore, channel: Channel, draft: Draft) -> None:
    """End the cut reply ``draft`` (of ``channel``) with the interrupted marker, record its round
    ``interrupted`` and clear the record. A write the channel refuses is logged (the record is
    cleared all the same: the next reply of the conversation takes its place). Raises what the
    store raises."""
    where = _where(draft)
    marker = interrupted_marker(TAKEOVER_CAUSE)
    log.warning("%s: an answer was cut off when its writer stopped; marking it", where)
    try:
        if draft.message_id is not None:
            text = append_line(draft.text, marker)
            ref = MessageRef(draft.chat_id, draft.message_id)
            await channel.edit_message(ref, text, formatted=draft.formatted)
        else:
            await channel.send_message(
                draft.chat_id, marker, reply_to=draft.reply_to, thread_id=draft.thread_id
            )
    except ChannelError as exc:
        log.warning("%s: could not mark the cut answer: %s", where, exc)
    await store.clear_draft(draft.channel, draft.chat_id, draft.thread_id)
    cut = RoundRecord(draft.channel, draft.chat_id, None, 1, None, None, None, None, 1, None, "")
    await store.record_round(replace(cut, outcome="interrupted", thread_id=draft.thread_id))


async def mark_cut_answers(store: ConversationStore, channels: Mapping[str, Channel]) -> int:
    """At the start of the only instance on ``store``: mark every reply left in flight (each
    was cut by a hard kill of the previous run); returns how many. A record of a channel that
    is not configured any more is dropped, with a log line."""
    marked = 0
    for draft in await store.drafts():
        channel = channels.get(draft.channel)
        if channel is None:
            log.warning("%s: dropping a cut answer of a channel not configured", _where(draft))
            await store.clear_draft(draft.channel, draft.chat_id, draft.thread_id)
            continue
        await mark_cut_answer(store, channel, draft)
        marked += 1
    return marked


def _where(draft: Draft) -> str:
    thread = f":{draft.thread_id}" if draft.thread_id is not None else ""
    return f"{draft.channel}:{draft.chat_id}{thread}"
