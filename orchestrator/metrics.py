"""Prometheus metrics and the ``/healthz`` + ``/metrics`` endpoint (architecture §6 ``server``).

``GET /healthz`` answers ``{"status": "ok" | "degraded", "channels": {name: {"state": ...,
"reason": ...}}}`` (``reason`` only when degraded): 200 while every channel is ``ok``, 503 while
any is not (architecture §7: a channel retrying a transient failure, or getUpdates answering 409
Conflict while another instance polls the bot).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest

from channels.base import ChannelHealth
from orchestrator.http_server import HttpRequest, HttpResponse
from orchestrator.store import RoundRecord

__all__ = ["Metrics", "health_body"]


def health_body(states: Mapping[str, ChannelHealth]) -> tuple[int, bytes]:
    """The ``/healthz`` status code and JSON body for the channels' ``states``."""
    channels: dict[str, dict[str, str]] = {}
    for name, health in states.items():
        entry: dict[str, str] = {"state": health.state}
        if health.state != "ok":
            entry["reason"] = health.reason or "unknown"
        channels[name] = entry
    ok = all(health.state == "ok" for health in states.values())
    body = {"status": "ok" if ok else "degraded", "channels": channels}
    return (200 if ok else 503), json.dumps(body).encode()


class Metrics:
    def __init__(self) -> None:
        self.health: Callable[[], Mapping[str, ChannelHealth]] = dict
        """The channels' states by name (the daemon points it at its channels)."""
        self.registry = CollectorRegistry()
        self.rounds = Counter(
            "relaybot_rounds",
            "Model rounds by provider and outcome",
            ["provider", "outcome"],
            registry=self.registry,
        )
        self.ttft = Histogram(
            "relaybot_ttft_seconds",
            "Time to first text delta of streamed rounds",
            registry=self.registry,
        )
        self.tokens = Counter(
            "relaybot_tokens",
            "Tokens reported by providers",
            ["provider", "kind"],
            registry=self.registry,
        )

    def observe_round(self, record: RoundRecord) -> None:
        provider = record.provider or "none"
        self.rounds.labels(provider, record.outcome).inc()
        if record.ttft_ms is not None:
            self.ttft.observe(record.ttft_ms / 1000.0)
        for kind, count in (("input", record.input_tokens), ("output", record.output_tokens)):
            if count:
                self.tokens.labels(provider, kind).inc(count)

    async def handle(self, request: HttpRequest) -> HttpResponse:
        path = request.target.split("?", 1)[0]
        if request.method == "GET" and path == "/healthz":
            status, body = health_body(self.health())
            return HttpResponse(status, body)
        if request.method == "GET" and path == "/metrics":
            return HttpResponse(
                200, generate_latest(self.registry), content_type=CONTENT_TYPE_LATEST
            )
        return HttpResponse(404, b'{"error":"not found"}')
