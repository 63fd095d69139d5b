"""Fitting a turn's requests to the model's context budget (architecture §5 "Context budget"):
the request of each round with its history trimmed, oldest turns first, to what every provider
of the chain takes; the history summarized first under ``agent.history.compaction:
summarize``; the estimate calibrated by each provider's reported usage, and a ceiling learnt
from a request a model rejected as too long.

:class:`PromptFit` holds that learning for one :class:`~orchestrator.turn.runner.TurnRunner`
(one home); the arithmetic is :mod:`orchestrator.turn.history_budget`'s, the summary's
:mod:`orchestrator.turn.compaction`'s.
"""

from __future__ import annotations

import logging

from orchestrator.store import ConversationStore
from orchestrator.tools.registry import ToolRegistry
from orchestrator.tools.tool_calls import normalise_ids
from orchestrator.turn.chat_setup import ChatSetup
from orchestrator.turn.compaction import summary_request, with_summary
from orchestrator.turn.history_budget import (
    SQUEEZE,
    Calibration,
    answer_reserve,
    context_window,
    estimate_message,
    estimate_tools,
    fit,
    prompt_limit,
)
from orchestrator.turn.rounds import ChainEntry, RoundFailed, RoundRunner
from orchestrator.turn.turn_state import TurnState
from providers.base import ChatMessage, ChatRequest
from providers.events import StreamEvent

__all__ = ["SUMMARY_REQUEST", "PromptFit"]

log = logging.getLogger("orchestrator.turn.runner")

SUMMARY_REQUEST = (
    "(No more tool calls are available for this request. Answer now with what you have found, "
    "and say briefly what is still open.)"
)
_NO_CEILING = 1 << 40


def _setup(turn: TurnState) -> ChatSetup:
    assert turn.setup is not None, "the turn's setup is loaded first"
    return turn.setup


class PromptFit:
    """The requests of a runner's turns, fitted (module docstring).

    Args:
        tools: the tools offered to the model (their specs count against the budget).
        store: where a summary replaces the turns it summarizes.
    """

    def __init__(self, tools: ToolRegistry, store: ConversationStore) -> None:
        self._tools = tools
        self._store = store
        self._calibration = Calibration()
        self._ceiling = _NO_CEILING  # estimated prompt tokens; lowered by a rejection
        self._ceiling_chain: list[ChainEntry] | None = None  # the chain it was learnt on

    def squeeze(self, rounds: RoundRunner, estimate: int) -> int:
        """A request of ``estimate`` tokens was rejected as too long: requests from now on stay
        under a share of it (:data:`~orchestrator.turn.history_budget.SQUEEZE`). Returns the
        new ceiling, in estimated tokens."""
        self._ceiling = max(1, min(self.limit(rounds), int(estimate * SQUEEZE)))
        return self._ceiling

    def observe(self, provider: str, estimate: int, input_tokens: int | None) -> None:
        """A round's estimate against the input tokens its provider reported (or None)."""
        self._calibration.observe(provider, estimate, input_tokens)

    def request(self, turn: TurnState, summary: bool, offer_tools: bool) -> tuple[ChatRequest, int]:
        """The request of a round and its estimated prompt tokens. A ``summary`` round (after
        ``max_tool_rounds`` rounds with tools, or after the repeat guard refused a call) offers
        no tools and asks for an answer. Tool-call ids are normalised for whichever provider
        serves it. The history is trimmed, oldest turns first, to fit every provider of the
        chain (:mod:`orchestrator.turn.history_budget`); the messages left out are counted in
        ``turn.outcome.dropped_messages``."""
        extra = [ChatMessage("user", SUMMARY_REQUEST)] if summary else []
        setup = _setup(turn)
        system = ChatMessage("system", with_summary(setup.system_prompt, turn.summary))
        tools = self._tools.specs if offer_tools else ()
        messages = [*turn.history, *turn.new_messages]
        fixed = sum(estimate_message(m) for m in (system, *extra)) + estimate_tools(tools)
        fitted = fit(messages, limit=self.limit(setup.rounds), fixed=fixed)
        turn.outcome.dropped_messages = max(turn.outcome.dropped_messages, fitted.dropped)
        kept = normalise_ids(messages[fitted.start :])
        return ChatRequest(messages=(system, *kept, *extra), tools=tools), fitted.tokens

    async def compact(self, turn: TurnState) -> None:
        """``agent.history.compaction: summarize``: when the history does not fit, its oldest
        turns are cut down to half the budget and replaced, in the store too, by a summary the
        model writes (:mod:`orchestrator.turn.compaction`). A failed summary round leaves the
        history as it is (the request then drops what does not fit)."""
        setup = _setup(turn)
        limit = self.limit(setup.rounds)
        system = ChatMessage("system", with_summary(setup.system_prompt, turn.summary))
        fixed = estimate_message(system) + estimate_tools(self._tools.specs)
        messages = [*turn.history, *turn.new_messages]
        if fit(messages, limit=limit, fixed=fixed).dropped == 0:
            return
        start = min(fit(messages, limit=limit // 2, fixed=fixed).start, len(turn.history))
        if start == 0:
            return
        request = summary_request(turn.summary, turn.history[:start], limit_tokens=limit)
        try:
            result = await setup.rounds.run(request, _Discarded())
        except RoundFailed as failed:
            log.warning("could not summarize older turns in %s: %s", turn.where, failed.error)
            return
        text = result.response.text.strip()
        if not text:
            return
        inbound = turn.inbound
        keep = len(turn.history) - start
        await self._store.compact(turn.channel.name, inbound.chat_id, inbound.thread_id, keep, text)
        log.info("summarized %d older messages in %s", start, turn.where)
        turn.history, turn.summary = turn.history[start:], text
        turn.outcome.dropped_messages = max(turn.outcome.dropped_messages, start)

    def limit(self, rounds: RoundRunner) -> int:
        """Estimated prompt tokens that fit every provider of the chain of ``rounds``
        (architecture §5 "Context budget"), each calibrated by its own reported usage, and
        below the ceiling learnt from a rejection."""
        limits = []
        for entry in rounds.chain:
            config = entry.config
            window = context_window(config.model, config.context_window)
            reserve = answer_reserve(window, config.max_tokens)
            ratio = self._calibration.ratio(entry.provider.name)
            limits.append(prompt_limit(window, reserve, ratio))
        if self._ceiling_chain is not rounds.chain:  # a reload or /model replaced the chain
            self._ceiling, self._ceiling_chain = _NO_CEILING, rounds.chain
        return min([*limits, self._ceiling])


class _Discarded:
    """The sink of a summary round: nothing of it reaches the chat."""

    def event(self, event: StreamEvent) -> None:
        pass

    def restart(self) -> None:
        pass
