"""One model round across the provider chain, with the failure rules of DESIGN §2.

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
   what it holds of the failed attempt (DESIGN §4 "Restart").
4. An OpenAI Chat Completions provider that rejects tools combined with a reasoning effort (400
   ``invalid_request_error`` naming ``reasoning_effort``) is tried once more through the Responses
   API with the same key and base URL, and that is logged.

With no provider left, :class:`RoundFailed` carries the last error and a few words for the user.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from config.models import ProviderConfig
from providers.base import ChatRequest, CompletionResponse, ModelProvider, ResponseFolder
from providers.errors import (
    ProviderAuthError,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    StreamProtocolError,
    StreamTruncated,
)
from providers.events import StreamEvent, TextDelta
from providers.openai_chat import rejects_reasoning_effort

__all__ = ["ChainEntry", "RoundFailed", "RoundResult", "RoundRunner", "RoundSink", "user_cause"]

log = logging.getLogger(__name__)

BACKOFF_START_SECS = 0.5


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
    def __init__(self, error: ProviderError | None, attempts: int) -> None:
        super().__init__(str(error) if error else "no provider configured")
        self.error = error
        self.attempts = attempts
        self.cause = user_cause(error)


def user_cause(error: BaseException | None) -> str:
    """A few words for the interrupted marker (DESIGN §3)."""
    if isinstance(error, (StreamTruncated, StreamProtocolError)):
        return "the model stopped before finishing"
    if isinstance(error, ProviderTimeout):
        return "the model did not answer in time"
    if isinstance(error, ProviderAuthError):
        if error.status_code == 403:
            return "the model service denied access with this API key"
        return "the model service refused the API key"
    return "the model service failed"


@dataclass
class _Attempt:
    got_text: bool = False
    ttft_ms: float | None = None
    folder: ResponseFolder = field(default_factory=ResponseFolder)


class RoundRunner:
    """Serves rounds from a provider chain.

    Args:
        chain: the providers of ``agent.providers``, in order.
        sleep: awaited for backoff delays (seconds); injectable for tests.
        clock: monotonic seconds.
        responses_fallback: builds the Responses-API provider used for the reasoning-effort retry.
    """

    def __init__(
        self,
        chain: list[ChainEntry],
        *,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
        responses_fallback: Callable[[ChainEntry], ModelProvider] | None = None,
    ) -> None:
        self._chain = chain
        self._sleep = sleep
        self._clock = clock
        self._responses_fallback = responses_fallback or _build_responses_provider

    async def run(self, request: ChatRequest, sink: RoundSink) -> RoundResult:
        """Serve one round. Raises :class:`RoundFailed` when no provider could."""
        start = self._clock()
        attempts = 0
        last_error: ProviderError | None = None

        def begin() -> None:
            nonlocal attempts
            attempts += 1
            if attempts > 1:
                sink.restart()

        for entry in self._chain:
            name = entry.provider.name
            provider = entry.provider
            streamable = provider.supports_streaming() and (
                not request.tools or provider.supports_streaming_tool_events()
            )
            blocking_tries = entry.config.max_retries + (0 if streamable else 1)
            if streamable:
                begin()
                attempt = _Attempt()
                try:
                    await self._stream(provider, request, sink, attempt, start)
                    return self._result(attempt.folder.response(), name, attempts, attempt.ttft_ms)
                except ProviderError as exc:
                    last_error = exc
                    log.warning("provider %s: stream failed: %s", name, exc)
                    if isinstance(exc, ProviderTimeout) or attempt.got_text:
                        continue
                    if rejects_reasoning_effort(exc) and entry.config.kind == "openai_chat":
                        log.warning(
                            "provider %s: model rejects tools with a reasoning effort; "
                            "retrying the round once through the Responses API",
                            name,
                        )
                        begin()
                        attempt = _Attempt()
                        fallback = self._responses_fallback(entry)
                        try:
                            await self._stream(fallback, request, sink, attempt, start)
                            return self._result(
                                attempt.folder.response(), name, attempts, attempt.ttft_ms
                            )
                        except ProviderError as retry_exc:
                            last_error = retry_exc
                            log.warning(
                                "provider %s: Responses API retry failed: %s", name, retry_exc
                            )
                            continue
                        finally:
                            await fallback.aclose()
                    if not exc.retryable:
                        continue
            for index in range(blocking_tries):
                retry = index if streamable else index - 1  # 0 = the first retry
                if retry >= 0:
                    delay = self._backoff(retry, last_error)
                    if delay > entry.config.timeout_secs:
                        # A Retry-After longer than the provider's own time bound: the next
                        # provider serves the round rather than the chat waiting that long.
                        log.warning("provider %s: asked to wait %g s; trying the next", name, delay)
                        break
                    await self._sleep(delay)
                begin()
                try:
                    response = await provider.complete(request)
                except ProviderError as exc:
                    last_error = exc
                    log.warning("provider %s: blocking call failed: %s", name, exc)
                    if isinstance(exc, ProviderTimeout) or not exc.retryable:
                        break
                    continue
                for event in response.events():
                    sink.event(event)
                return self._result(response, name, attempts, None)
        raise RoundFailed(last_error, attempts)

    async def _stream(
        self,
        provider: ModelProvider,
        request: ChatRequest,
        sink: RoundSink,
        attempt: _Attempt,
        start: float,
    ) -> None:
        stream = provider.stream(request)
        async for event in stream:
            if isinstance(event, TextDelta) and event.chunk.delta and not attempt.got_text:
                attempt.got_text = True
                attempt.ttft_ms = (self._clock() - start) * 1000.0
            attempt.folder.add(event)
            sink.event(event)
        if attempt.folder.final is None:
            raise StreamTruncated("the stream ended without its terminal event")
        # Output items a provider needs sent back verbatim (Responses reasoning/function_call
        # items, Anthropic thinking blocks) are exposed on the stream once it ended properly.
        attempt.folder.provider_items = tuple(getattr(stream, "provider_items", ()))

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


def _build_responses_provider(entry: ChainEntry) -> ModelProvider:
    from providers.registry import build_provider

    config = entry.config.model_copy(update={"kind": "openai_responses", "reasoning_effort": None})
    return build_provider(entry.provider.name, config)
