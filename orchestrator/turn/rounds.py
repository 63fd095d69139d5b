"""One model round across the provider chain, with the failure rules of architecture §2.

Theory of operation
-------------------
A round is served by the first provider in ``agent.providers`` that completes it. For each
provider:

1. If it can stream (and can stream tool events when tools are offered), stream the round.
   Every event goes to the sink as it arrives.
2. The dividing line is the first non-empty raw text delta of the attempt (``StreamChunk.delta``
   before ``<think>`` stripping and redaction; reasoning-only deltas do not count):

   * failure *before* it (connect failure, non-2xx, an error event after HTTP 200, a protocol
     error): the round is sent again as a blocking call to the same provider, up to
     ``max_retries`` times, with exponential backoff from 0.5 s, honouring ``Retry-After``
     (one longer than the provider's ``timeout_secs`` is not waited: the next provider serves).
     Auth and bad-request errors are not retried;
   * a timeout (connect, headers or idle) is never sent again to the same provider;
   * failure *after* it, or nothing left to try: the next provider serves the round.
3. Every second or later attempt of the round is preceded by ``sink.restart()`` so delivery drops
   what it holds of the failed attempt (architecture §4 "Restart").
4. An OpenAI Chat Completions provider that rejects tools combined with a reasoning effort (400
   ``invalid_request_error`` naming ``reasoning_effort``) is tried once more through the Responses
   API with the same key and base URL, and that is logged.

With no provider left, :class:`RoundFailed` carries the last error and a few words for the user
that say what to do (:func:`orchestrator.turn.failure_causes.user_cause`, one table by error class).
When that error is an unknown model (:class:`providers.errors.ModelNotFound`), the provider's
server is first asked which models it lists (bounded by ``LIST_MODELS_SECS``), so the words can
name them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from config.models import ProviderConfig
from orchestrator.turn.failure_causes import FailureContext, user_cause
from providers.base import (
    ChatRequest,
    CompletionResponse,
    ModelProvider,
    PacedStream,
    ResponseFolder,
)
from providers.errors import (
    ModelNotFound,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    StreamTruncated,
)
from providers.events import StreamEvent, TextDelta
from providers.openai_chat import rejects_reasoning_effort

__all__ = ["ChainEntry", "RoundFailed", "RoundResult", "RoundRunner", "RoundSink", "user_cause"]
# ``user_cause`` stays importable from here (its home is :mod:`orchestrator.turn.failure_causes`).

log = logging.getLogger(__name__)

BACKOFF_START_SECS = 0.5
LIST_MODELS_SECS = 5.0
"""Bound, in seconds, of asking the server of an unknown model which models it lists."""
CLOSE_BOUND_SECS = 5.0
"""How long closing a provider stream may take, in seconds."""


class RoundSink(Protocol):
    def event(self, event: StreamEvent) -> None:
        """An event of the current attempt, in order of arrival."""

    def restart(self) -> None:
        """A new attempt of the same round begins: drop what the failed one produced."""


@dataclass(frozen=True, slots=True)
class ChainEntry:
    provider: ModelProvider
    config: ProviderConfig


@dataclass(frozen=True, slots=True)
class RoundResult:
    """``ttft_ms``: from the round's start to the first non-empty raw text delta of the serving
    attempt; ``None`` for rounds with no text and for blocking rounds."""

    response: CompletionResponse
    provider: str
    attempts: int
    ttft_ms: float | None


class RoundFailed(Exception):
    """No provider could serve the round.

    Attributes:
        error: the last provider error (``None``: no provider configured).
        attempts: attempts made across the chain.
        context: the provider of the last error, its config and the attempts.
        cause: the user's words (:func:`orchestrator.turn.failure_causes.user_cause`).
    """

    def __init__(
        self,
        error: ProviderError | None,
        attempts: int,
        context: FailureContext | None = None,
    ) -> None:
        super().__init__(str(error) if error else "no provider configured")
        self.error = error
        self.attempts = attempts
        self.context = context or FailureContext(attempts=attempts)
        self.cause = user_cause(error, self.context)


@dataclass
class _Attempt:
    got_text: bool = False
    ttft_ms: float | None = None
    folder: ResponseFolder = field(default_factory=ResponseFolder)


@dataclass
class _Round:
    """One round across the chain: its sink, start (monotonic seconds) and attempts so far."""

    sink: RoundSink
    start: float
    pace: Callable[[], Awaitable[None] | None] | None = None
    attempts: int = 0
    provider_attempts: int = 0  # attempts of the provider of ``last_error``
    last_error: ProviderError | None = None
    last_entry: ChainEntry | None = None
    on_error: Callable[[str, ProviderError], None] | None = None

    def begin(self) -> _Attempt:
        """A new attempt; every second or later one tells the sink to drop the failed one."""
        self.attempts += 1
        self.provider_attempts += 1
        if self.attempts > 1:
            self.sink.restart()
        return _Attempt()

    def failed(self, name: str, how: str, error: ProviderError) -> None:
        """An attempt failed with ``error``: logged (its message), counted, and kept as the
        round's last error without its traceback. The traceback's frames hold this round, its
        sink and so the delivery driver: kept, it would make the round a reference cycle left to
        the cycle collector. Nothing shows it: the log line, the metrics, the user's words and
        the wait before a retry use the error alone."""
        log.warning("provider %s: %s failed: %s", name, how, error)
        if self.on_error is not None:
            self.on_error(name, error)
        self.last_error = error.with_traceback(None)


class RoundRunner:
    """Serves rounds from a provider chain.

    Args:
        chain: the providers of ``agent.providers``, in order.
        sleep: awaited for backoff delays (seconds); injectable for tests.
        clock: monotonic seconds.
        responses_fallback: builds the Responses-API provider used for the reasoning-effort retry.
        on_error: told of every failed attempt (provider name, the error), for metrics.
        on_fallback: told when the next provider serves a round (from, to), for metrics.
    """

    def __init__(
        self,
        chain: list[ChainEntry],
        *,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
        responses_fallback: Callable[[ChainEntry], ModelProvider] | None = None,
        on_error: Callable[[str, ProviderError], None] | None = None,
        on_fallback: Callable[[str, str], None] | None = None,
    ) -> None:
        self._chain = chain
        self._on_error = on_error
        self._on_fallback = on_fallback
        self._sleep = sleep
        self._clock = clock
        self._responses_fallback = responses_fallback or _build_responses_provider

    async def run(
        self,
        request: ChatRequest,
        sink: RoundSink,
        pace: Callable[[], Awaitable[None] | None] | None = None,
    ) -> RoundResult:
        """Serve one round. ``pace``, when given, paces the reads of a streaming provider
        (:meth:`providers.base.PacedStream.pace_reads`; the reply's
        :meth:`~orchestrator.turn.round_sink.RoundSink.pause`). Raises :class:`RoundFailed`
        when no provider could."""
        round_ = _Round(sink, self._clock(), pace, on_error=self._on_error)
        chain = self._chain  # a reload replaces the list; this round keeps the one it began with
        for index, entry in enumerate(chain):
            round_.last_entry, round_.provider_attempts = entry, 0
            result = await self._serve(entry, request, round_)
            if result is not None:
                return result
            if index + 1 < len(chain) and self._on_fallback is not None:
                self._on_fallback(entry.provider.name, chain[index + 1].provider.name)
        last, error = round_.last_entry, round_.last_error
        context = FailureContext(attempts=round_.attempts)
        if last is not None:
            context = FailureContext(
                last.provider.name, last.config, attempts=round_.provider_attempts
            )
            if isinstance(error, ModelNotFound):
                await _name_listed_models(error, last.config)
        raise RoundFailed(error, round_.attempts, context)

    @property
    def chain(self) -> list[ChainEntry]:
        """The providers rounds are served from, in order."""
        return self._chain

    def replace_chain(self, chain: list[ChainEntry]) -> None:
        """Serve the next rounds from ``chain`` (a config reload); rounds already running keep
        the chain they began with."""
        self._chain = list(chain)

    async def _serve(
        self, entry: ChainEntry, request: ChatRequest, round_: _Round
    ) -> RoundResult | None:
        """Serve the round from one provider; ``None``: the next provider serves it."""
        provider = entry.provider
        streamable = provider.supports_streaming() and (
            not request.tools or provider.supports_streaming_tool_events()
        )
        if not streamable:
            return await self._complete(entry, request, round_, streamed=False)
        attempt = round_.begin()
        try:
            return await self._stream(provider, provider.name, request, round_, attempt)
        except ProviderError as exc:
            round_.failed(provider.name, "stream", exc)
            if isinstance(exc, ProviderTimeout) or attempt.got_text:
                return None
            if rejects_reasoning_effort(exc) and entry.config.kind == "openai_chat":
                return await self._via_responses(entry, request, round_)
            if not exc.retryable:
                return None
        return await self._complete(entry, request, round_, streamed=True)

    async def _via_responses(
        self, entry: ChainEntry, request: ChatRequest, round_: _Round
    ) -> RoundResult | None:
        """The reasoning-effort retry: the round once more through the Responses API."""
        name = entry.provider.name
        log.warning(
            "provider %s: model rejects tools with a reasoning effort; "
            "retrying the round once through the Responses API",
            name,
        )
        attempt = round_.begin()
        fallback = self._responses_fallback(entry)
        try:
            return await self._stream(fallback, name, request, round_, attempt)
        except ProviderError as exc:
            round_.failed(name, "Responses API retry", exc)
            return None
        finally:
            await fallback.aclose()

    async def _complete(
        self, entry: ChainEntry, request: ChatRequest, round_: _Round, *, streamed: bool
    ) -> RoundResult | None:
        """Blocking calls: the retries after a failed stream (``streamed``), or the first call
        and its retries for a provider that cannot stream the round."""
        provider = entry.provider
        for index in range(entry.config.max_retries + (0 if streamed else 1)):
            retry = index if streamed else index - 1  # 0 = the first retry
            if retry >= 0 and not await self._wait_to_retry(entry, retry, round_.last_error):
                return None
            round_.begin()
            try:
                response = await provider.complete(request)
            except ProviderError as exc:
                round_.failed(provider.name, "blocking call", exc)
                if isinstance(exc, ProviderTimeout) or not exc.retryable:
                    return None
                continue
            for event in response.events():
                round_.sink.event(event)
            return self._result(response, provider.name, round_.attempts, None)
        return None

    async def _wait_to_retry(
        self, entry: ChainEntry, retry: int, error: ProviderError | None
    ) -> bool:
        """Sleep the backoff before retry number ``retry``; False when the provider asks for
        longer than its own ``timeout_secs`` (the next provider serves the round rather than
        the chat waiting that long)."""
        delay = self._backoff(retry, error)
        if delay > entry.config.timeout_secs:
            log.warning(
                "provider %s: asked to wait %g s; trying the next", entry.provider.name, delay
            )
            return False
        await self._sleep(delay)
        return True

    async def _stream(
        self,
        provider: ModelProvider,
        name: str,
        request: ChatRequest,
        round_: _Round,
        attempt: _Attempt,
    ) -> RoundResult:
        """Stream one attempt to its end. The stream is closed however it ends (a ``/stop``
        cancels the task iterating it: the provider's connection is closed then too)."""
        stream = provider.stream(request)
        events: AsyncIterator[StreamEvent] = stream
        if isinstance(stream, PacedStream):
            # a read's text in one delta; reads paced
            events = stream.joined()
            if round_.pace is not None:
                stream.pace_reads(round_.pace)
        fold, sink = attempt.folder.add, round_.sink.event
        try:
            async for event in events:
                if not attempt.got_text and isinstance(event, TextDelta) and event.chunk.delta:
                    attempt.got_text = True
                    attempt.ttft_ms = (self._clock() - round_.start) * 1000.0
                fold(event)
                sink(event)
        finally:
            await _close(stream)
        if attempt.folder.final is None:
            raise StreamTruncated("the stream ended without its terminal event")
        # Output items a provider needs sent back verbatim (Responses reasoning/function_call
        # items, Anthropic thinking blocks) are exposed on the stream once it ended properly.
        attempt.folder.provider_items = tuple(getattr(stream, "provider_items", ()))
        return self._result(attempt.folder.response(), name, round_.attempts, attempt.ttft_ms)

    @staticmethod
    def _backoff(retry: int, error: ProviderError | None) -> float:
        """Seconds before retry number ``retry`` (0-based): 0.5, 1, 2…, or the ``Retry-After``."""
        delay: float = BACKOFF_START_SECS * 2.0**retry
        if isinstance(error, ProviderRateLimited) and error.retry_after is not None:
            delay = max(error.retry_after, 0.0)
        return delay

    @staticmethod
    def _result(
        response: CompletionResponse, name: str, attempts: int, ttft_ms: float | None
    ) -> RoundResult:
        return RoundResult(response=response, provider=name, attempts=attempts, ttft_ms=ttft_ms)


async def _close(stream: AsyncIterator[StreamEvent]) -> None:
    """Close a provider stream early or late (an async generator or a stream object with
    ``aclose``), shielded so that a cancelled turn still releases the connection (for at most
    ``CLOSE_BOUND_SECS``)."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with anyio.move_on_after(CLOSE_BOUND_SECS, shield=True):
            await aclose()


async def _name_listed_models(error: ModelNotFound, config: ProviderConfig) -> None:
    """Fill in the model asked for and the names the server lists (left ``None`` when the
    listing fails; its failure is logged, not raised)."""
    from providers.model_list import list_models

    if error.model is None:
        error.model = config.model
    if error.available is not None:
        return
    try:
        error.available = tuple(await list_models(config, timeout_secs=LIST_MODELS_SECS))
    except ProviderError as exc:
        log.info("the models of %s could not be listed: %s", config.resolved_base_url, exc)


def _build_responses_provider(entry: ChainEntry) -> ModelProvider:
    from providers.registry import build_provider

    config = entry.config.model_copy(update={"kind": "openai_responses", "reasoning_effort": None})
    return build_provider(entry.provider.name, config)
