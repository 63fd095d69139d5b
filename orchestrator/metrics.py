"""Prometheus metrics and the ``/healthz`` body (architecture §7 "Metrics").

``GET /healthz`` answers ``{"status": "ok" | "degraded", "channels": {name: {"state": ...,
"reason": ...}}, "providers": {name: {"state": ..., "reason": ...}}}`` (``reason`` only when
degraded): 200 while every channel and provider is ``ok``, 503 while one is not (a channel
retrying its start or a lost connection, getUpdates answering 409 Conflict while another instance
polls the bot; a provider whose last call failed).

``GET /metrics`` is the Prometheus text format
(https://prometheus.io/docs/instrumenting/exposition_formats/) of :class:`Metrics`' registry:

=========================================  =========================================
``relaybot_replies_total``                 replies by channel and outcome
``relaybot_rounds_total``                  model rounds by provider and outcome
``relaybot_ttft_seconds``                  histogram: time to the first text delta, by provider
``relaybot_reply_duration_seconds``        histogram: inbound message to reply delivered, by
                                           channel
``relaybot_tokens_total``                  tokens by provider and kind (input, output, cached)
``relaybot_writes_total``                  channel writes that landed, by channel and kind
                                           (send, edit, delete, typing)
``relaybot_rate_limit_waits_total``        429 answers (a wait imposed), by channel
``relaybot_rate_limit_wait_seconds_total`` the seconds those answers asked for, by channel
``relaybot_redactions_total``              secrets replaced, by shape
``relaybot_redaction_overmasks_total``     last resorts of the rendered-form check that masked
                                           more than a secret (a ``line`` or the whole
                                           ``piece``), by shape
``relaybot_active_turns``                  gauge: turns running now
``relaybot_queued_messages``               gauge: messages waiting behind a running answer
``relaybot_provider_errors_total``         failed provider attempts by provider and error class
``relaybot_fallbacks_total``               rounds handed to the next provider (from, to)
``relaybot_provider_requests_waiting``     gauge: requests waiting for one of a provider's
                                           pooled connections now, by provider
``relaybot_provider_requests_queued_total`` requests that waited for one, by provider
``relaybot_channel_restarts_total``        channel (re)starts after a failure, by channel
=========================================  =========================================
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from channels.base import ChannelHealth
from channels.errors import ChannelRateLimited
from orchestrator.store import RoundRecord

__all__ = ["AdmissionCounts", "Metrics", "PoolCounts", "health_body"]

_SECONDS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class PoolCounts(Protocol):
    """A provider pool's queue as the metrics read it (:class:`providers.pool_queue.PoolQueue`)."""

    waiting: int
    queued: int


class AdmissionCounts(Protocol):
    """A provider's stream-open admission as the metrics read it
    (:class:`providers.open_admission.OpenAdmission`)."""

    deferred: int


class _PoolQueues(Collector):
    """The pool queue gauges, read from :attr:`Metrics.pool_queues` at each scrape."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        waiting = GaugeMetricFamily(
            "relaybot_provider_requests_waiting",
            "Requests waiting for one of a provider's pooled connections",
            labels=["provider"],
        )
        queued = CounterMetricFamily(
            "relaybot_provider_requests_queued",
            "Requests that waited for one of a provider's pooled connections",
            labels=["provider"],
        )
        deferred = CounterMetricFamily(
            "relaybot_provider_opens_deferred",
            "Stream opens that waited for a later pass of the event loop (a burst of new replies)",
            labels=["provider"],
        )
        for name, queue in self._metrics.pool_queues().items():
            waiting.add_metric([name], queue.waiting)
            queued.add_metric([name], queue.queued)
        for name, admission in self._metrics.open_admissions().items():
            deferred.add_metric([name], admission.deferred)
        yield waiting
        yield queued
        yield deferred


def _entries(states: Mapping[str, ChannelHealth]) -> dict[str, dict[str, str]]:
    entries: dict[str, dict[str, str]] = {}
    for name, health in states.items():
        entry: dict[str, str] = {"state": health.state}
        if health.state != "ok":
            entry["reason"] = health.reason or "unknown"
        entries[name] = entry
    return entries


def health_body(
    channels: Mapping[str, ChannelHealth],
    providers: Mapping[str, ChannelHealth] | None = None,
) -> tuple[int, bytes]:
    """The ``/healthz`` status code and JSON body for the channels' (and providers') states."""
    states = [*channels.values(), *(providers or {}).values()]
    ok = all(health.state == "ok" for health in states)
    body: dict[str, object] = {"status": "ok" if ok else "degraded", "channels": _entries(channels)}
    if providers is not None:
        body["providers"] = _entries(providers)
    return (200 if ok else 503), json.dumps(body).encode()


class Metrics:
    """The daemon's metric families (module docstring) in a registry of their own, and the
    providers' health as their last attempts left it."""

    def __init__(self) -> None:
        self.health: Callable[[], Mapping[str, ChannelHealth]] = dict
        """The channels' states by name (the daemon points it at its channels)."""
        self.providers: dict[str, ChannelHealth] = {}
        """Each configured provider's state: ``degraded`` while its last attempt failed."""
        self.registry = registry = CollectorRegistry()
        self.replies = Counter(
            "relaybot_replies", "Replies by channel and outcome", ["channel", "outcome"],
            registry=registry,
        )  # fmt: skip
        self.rounds = Counter(
            "relaybot_rounds", "Model rounds by provider and outcome", ["provider", "outcome"],
            registry=registry,
        )  # fmt: skip
        self.ttft = Histogram(
            "relaybot_ttft_seconds", "Time to the first text delta of streamed rounds",
            ["provider"], buckets=_SECONDS_BUCKETS, registry=registry,
        )  # fmt: skip
        self.reply_duration = Histogram(
            "relaybot_reply_duration_seconds", "From taking a message to its reply delivered",
            ["channel"], buckets=_SECONDS_BUCKETS, registry=registry,
        )  # fmt: skip
        self.tokens = Counter(
            "relaybot_tokens", "Tokens reported by providers", ["provider", "kind"],
            registry=registry,
        )  # fmt: skip
        self.writes = Counter(
            "relaybot_writes", "Channel writes that landed", ["channel", "kind"],
            registry=registry,
        )  # fmt: skip
        self.rate_limits = Counter(
            "relaybot_rate_limit_waits", "429 answers that imposed a wait", ["channel"],
            registry=registry,
        )  # fmt: skip
        self.rate_limit_seconds = Counter(
            "relaybot_rate_limit_wait_seconds", "Seconds the 429 answers asked to wait",
            ["channel"], registry=registry,
        )  # fmt: skip
        self.redactions = Counter(
            "relaybot_redactions", "Secrets replaced by the redactor", ["shape"],
            registry=registry,
        )  # fmt: skip
        self.overmasks = Counter(
            "relaybot_redaction_overmasks", "Rendered-form last resorts masking more than a secret",
            ["shape", "scope"], registry=registry,
        )  # fmt: skip
        self.active_turns = Gauge("relaybot_active_turns", "Turns running now", registry=registry)
        self.frozen_objects = Gauge(
            "relaybot_gc_frozen_objects",
            "Objects in the collector's permanent generation (the start-up heap, kept frozen)",
            registry=registry,
        )
        self.frozen_objects.set_function(gc.get_freeze_count)
        self.queued = Gauge(
            "relaybot_queued_messages", "Messages waiting behind a running answer",
            registry=registry,
        )  # fmt: skip
        self.provider_errors = Counter(
            "relaybot_provider_errors", "Failed provider attempts by error class",
            ["provider", "error"], registry=registry,
        )  # fmt: skip
        self.fallbacks = Counter(
            "relaybot_fallbacks", "Rounds handed to the next provider of the chain",
            ["from_provider", "to_provider"], registry=registry,
        )  # fmt: skip
        self.channel_restarts = Counter(
            "relaybot_channel_restarts", "Channel starts retried after a failure", ["channel"],
            registry=registry,
        )  # fmt: skip

        self.pool_queues: Callable[[], Mapping[str, PoolCounts]] = dict
        """Each provider's pool queue (``waiting``, ``queued``) by name, read at each scrape
        (the daemon points it at its providers)."""
        self.open_admissions: Callable[[], Mapping[str, AdmissionCounts]] = dict
        """Each provider's stream-open admission (``deferred``) by name, read at each scrape."""
        registry.register(_PoolQueues(self))

    # -- observers the daemon wires in ---------------------------------------------------------

    def observe_round(self, record: RoundRecord) -> None:
        """A round was recorded: its outcome, TTFT (ms in the record) and tokens."""
        provider = record.provider or "none"
        self.rounds.labels(provider, record.outcome).inc()
        if record.ttft_ms is not None:
            self.ttft.labels(provider).observe(record.ttft_ms / 1000.0)
        counts = (
            ("input", record.input_tokens),
            ("output", record.output_tokens),
            ("cached", record.cached_tokens),
        )
        for kind, count in counts:
            if count:
                self.tokens.labels(provider, kind).inc(count)
        if record.provider is not None and record.outcome in ("ok", "tool_calls"):
            self.providers[record.provider] = ChannelHealth()

    def observe_reply(self, channel: str, outcome: str, seconds: float) -> None:
        """A reply was delivered (or ended) ``seconds`` after its message was taken."""
        self.replies.labels(channel, outcome).inc()
        self.reply_duration.labels(channel).observe(max(seconds, 0.0))

    def observe_write(self, channel: str, kind: str, error: BaseException | None) -> None:
        """A channel write (:data:`channels.base.WriteObserver`)."""
        if error is None:
            self.writes.labels(channel, kind).inc()
        elif isinstance(error, ChannelRateLimited):
            self.rate_limits.labels(channel).inc()
            self.rate_limit_seconds.labels(channel).inc(max(error.retry_after, 0.0))

    def observe_provider_error(self, provider: str, error: BaseException) -> None:
        """A provider attempt failed: counted by class; the provider is degraded until its next
        served round."""
        name = type(error).__name__
        self.provider_errors.labels(provider, name).inc()
        first_line = (str(error).strip().splitlines() or [name])[0]
        self.providers[provider] = ChannelHealth("degraded", f"last call failed: {first_line}")

    def observe_fallback(self, from_provider: str, to_provider: str) -> None:
        self.fallbacks.labels(from_provider, to_provider).inc()

    def observe_redaction(self, shape: str) -> None:
        self.redactions.labels(shape).inc()

    def observe_overmask(self, shape: str, scope: str) -> None:
        self.overmasks.labels(shape, scope).inc()

    def set_providers(self, names: list[str]) -> None:
        """The configured providers (at start and after a reload): new ones start ``ok``,
        removed ones leave ``/healthz``."""
        self.providers = {name: self.providers.get(name, ChannelHealth()) for name in names}

    def health_response(self) -> tuple[int, bytes]:
        """``/healthz``'s status code and body now."""
        return health_body(self.health(), self.providers)
