"""Prometheus metrics and the ``/healthz`` + ``/metrics`` endpoint (DESIGN §6 ``server``)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest

from orchestrator.http_server import HttpRequest, HttpResponse
from orchestrator.store import RoundRecord

__all__ = ["Metrics"]


class Metrics:
    def __init__(self) -> None:
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
            return HttpResponse(200, b'{"status":"ok"}')
        if request.method == "GET" and path == "/metrics":
            return HttpResponse(
                200, generate_latest(self.registry), content_type=CONTENT_TYPE_LATEST
            )
        return HttpResponse(404, b'{"error":"not found"}')
