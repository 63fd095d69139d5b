"""What a chat's settings change in its turn (architecture §5 "Chat controls"): the rounds are
served by the chat's model (``/model``) with its system prompt (``/system``), and every round's
usage is kept, by sender, for ``/usage``, ``relaybot usage`` and the budgets; once the reply
is delivered its buttons change (architecture §3 "Buttons")."""

from __future__ import annotations

import time
from collections.abc import Callable

from config.models import AgentConfig
from orchestrator.controls.settings import MODEL, model_alias, system_prompt
from orchestrator.controls.usage import estimate_tokens, round_usage
from orchestrator.store import ConversationStore
from orchestrator.turn.rounds import RoundResult, RoundRunner
from orchestrator.turn.turn_state import ChatSetup, ReplySpacing, TurnState

__all__ = ["ChainFor", "ChatSetup", "buttons_after", "load_setup", "record_usage"]

ChainFor = Callable[[str | None], RoundRunner]
"""The round runner of a model alias of ``agent.models`` (``None``: ``agent.providers``)."""


async def load_setup(
    store: ConversationStore, agent: AgentConfig, chains: ChainFor, turn: TurnState
) -> ChatSetup:
    """The turn's setup from its conversation's settings in the store; a model the message
    itself names (:attr:`~channels.base.InboundMessage.model`) overrides the chat's."""
    inbound = turn.inbound
    settings = await store.controls.chat_settings(
        turn.channel.name, inbound.chat_id, inbound.thread_id
    )
    if inbound.model is not None:  # the request's own (a stateless API): it wins
        settings = {**settings, MODEL: inbound.model}
    return ChatSetup(chains(model_alias(settings, agent)), system_prompt(settings, agent))


async def record_usage(
    store: ConversationStore,
    turn: TurnState,
    rounds: RoundRunner,
    result: RoundResult | None,
    estimate: int,
    text: str,
) -> None:
    """Keep what the round spent: the provider's reported usage, else our estimate of the
    request (``estimate`` tokens) and of the text it produced. A round that failed before any
    text spent nothing worth counting and is not kept."""
    if result is None and not text:
        return
    name = result.provider if result is not None else rounds.chain[0].provider.name
    entry = next((e for e in rounds.chain if e.provider.name == name), rounds.chain[0])
    response = result.response if result is not None else None
    usage = response.usage if response is not None else None
    reported = None
    if usage is not None:
        reported = (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens)
    produced = response.text if response is not None else text
    inbound = turn.inbound
    record = round_usage(
        where=(turn.channel.name, inbound.chat_id, inbound.thread_id),
        user_id=inbound.sender_id,
        provider=name,
        model=entry.config.model,
        reported=reported,
        estimate=(estimate, estimate_tokens(produced)),
        prices=entry.config.prices,
        now=time.time(),
    )
    await store.controls.record_usage(record)


async def buttons_after(turn: TurnState) -> None:
    """The reply is delivered: its Stop button goes, Regenerate comes (architecture §3
    "Buttons"), spaced after its last write; nothing for a reply that could not be."""
    engine = turn.driver.engine
    delivered = not engine.stats.unreachable and turn.outcome.outcome != "undelivered"
    spacing = ReplySpacing(engine.next_write_at(), engine.settings.interval)
    chat, thread = turn.inbound.chat_id, turn.inbound.thread_id
    await turn.channel.answer_finished(chat, thread, regenerate=delivered, spacing=spacing)
