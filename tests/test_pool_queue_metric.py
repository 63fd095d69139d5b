"""The pool queue's metrics over a provider chain's life (architecture §7 "Metrics"): the
requests that waited for a pooled connection are counted under the provider's name whichever
provider object served them — the chain's, one a reload left behind, a model alias's — so
`relaybot_provider_requests_queued_total` never goes back at a reload and a chat on an alias
is counted too."""

from __future__ import annotations

from orchestrator.metrics import Metrics
from orchestrator.turn.provider_chain import ProviderChain
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import chain_config, text_answer
from tests.test_open_admission_edges import PATH, _burst_of, _text
from tests.test_transport_bounds import _cuts, _scraped

QUEUED = "relaybot_provider_requests_queued_total"


def _slow_answer(server: ProviderServer) -> None:
    body = text_answer("one two")
    server.script(PATH, Reply(body=body, cuts=_cuts(body), pauses={1: 0.1}))


async def test_the_queued_counter_never_goes_back_across_a_reload() -> None:
    # One connection, three streams: two wait, counted; a reload that changes the provider's
    # config builds a new provider (a new pool); the count stays and grows with its waits.
    async with ProviderServer() as server:
        _slow_answer(server)
        old = chain_config(server, max_connections=1)
        new = chain_config(server, max_connections=1, timeout_secs=77)
        metrics = Metrics()
        chain = ProviderChain(old, metrics)
        scraped: list[float] = []
        try:
            first = chain.rounds.chain[0].provider
            await _burst_of(3, lambda: _text(first))
            scraped.append(_scraped(metrics, QUEUED))
            chain.reconfigure(old, new)
            second = chain.rounds.chain[0].provider
            assert second is not first
            scraped.append(_scraped(metrics, QUEUED))
            await _burst_of(3, lambda: _text(second))
            scraped.append(_scraped(metrics, QUEUED))
        finally:
            await chain.aclose()
    assert scraped == [2, 2, 4]


async def test_requests_of_a_chat_on_a_model_alias_are_counted() -> None:
    async with ProviderServer() as server:
        _slow_answer(server)
        aliases = {"models": {"big": {"provider": "small", "model": "m2"}}}
        config = chain_config(server, aliases, max_connections=1)
        metrics = Metrics()
        chain = ProviderChain(config, metrics)
        try:
            aliased = chain.rounds_for(config, "big").chain[0].provider
            assert aliased is not chain.rounds.chain[0].provider
            results = await _burst_of(3, lambda: _text(aliased))
        finally:
            await chain.aclose()
    assert results == ["one two"] * 3
    assert _scraped(metrics, QUEUED) == 2
    assert _scraped(metrics, "relaybot_provider_requests_waiting") == 0
