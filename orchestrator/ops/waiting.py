"""The messages a previous run left waiting (architecture §5): queued again at start, oldest
first and ahead of any new one, on a local store; those older than ``agent.stale_after_secs``
get a short notice instead, once the channels run. (On a shared store the queue is the
store's: :mod:`orchestrator.chats.shared_queue`.)
"""

from __future__ import annotations

import logging
import time

from channels.base import Channel
from config.models import AgentConfig
from orchestrator.chats.dispatch import Dispatcher
from orchestrator.chats.shared_queue import SharedDispatcher
from orchestrator.store import ConversationStore, WaitingMessage
from orchestrator.turn.answering import Answering, stale_notice

__all__ = ["queue_waiting", "send_stale_notices"]

log = logging.getLogger("orchestrator.ops.daemon")


async def queue_waiting(
    store: ConversationStore,
    dispatcher: Dispatcher | SharedDispatcher | None,
    channels: dict[str, Channel],
    agent: AgentConfig,
) -> list[WaitingMessage]:
    """Queue the waiting messages, oldest first; returns the stale ones (a message for a
    channel no longer configured is dropped, with one line). With a shared store's dispatcher,
    nothing: its waiting messages are taken over by the sweep, by whichever instance claims
    their conversation (architecture §9)."""
    assert dispatcher is not None
    if isinstance(dispatcher, SharedDispatcher):
        return []
    stale: list[WaitingMessage] = []
    for waiting in await store.waiting():
        channel = channels.get(waiting.message.channel)
        if channel is None:
            log.warning("dropping a message kept for the channel %s", waiting.message.channel)
            await store.remove_waiting(waiting.id)
        elif time.time() - waiting.received_at > agent.stale_after_secs:
            stale.append(waiting)
        elif not dispatcher.submit(channel, waiting.message, waiting.id):
            await store.remove_waiting(waiting.id)
    return stale


async def send_stale_notices(
    store: ConversationStore,
    channels: dict[str, Channel],
    answering: Answering,
    stale: list[WaitingMessage],
) -> None:
    """Tell each stale message's sender it was not answered (and forget it)."""
    for waiting in stale:
        await store.remove_waiting(waiting.id)
        channel = channels[waiting.message.channel]
        await answering.say(channel, waiting.message, stale_notice(waiting), reply=True)
