"""The daemon's providers (architecture §2, §7 "Reload"): the chain of ``agent.providers`` that
rounds are served from, rebuilt by a reload without disturbing a round in flight.

:meth:`ProviderChain.reconfigure` keeps the provider objects (and their connections) whose
config did not change, builds the new and changed ones, and hands the next rounds the new chain;
a round already streaming keeps the list it began with (:meth:`RoundRunner.replace_chain
<orchestrator.turn.rounds.RoundRunner.replace_chain>`), so the providers left behind are closed only
by :meth:`aclose`, when the run ends.

A chat that chose a model alias of ``agent.models`` (``/model NAME``) is served by
:meth:`ProviderChain.rounds_for`: the alias's provider with the alias's model first, then the
rest of ``agent.providers`` as its fallbacks; built once per alias and config.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from config.models import RelaybotConfig
from orchestrator.metrics import AdmissionCounts, Metrics, PoolCounts
from orchestrator.turn.rounds import ChainEntry, RoundRunner
from providers.base import ModelProvider
from providers.registry import build_provider

__all__ = ["ProviderChain"]


class ProviderChain:
    """The providers of ``config.agent.providers`` behind one :class:`RoundRunner` whose
    failures and fallbacks feed ``metrics``."""

    def __init__(self, config: RelaybotConfig, metrics: Metrics) -> None:
        self._metrics = metrics
        self._retired: list[ChainEntry] = []
        self._aliases: dict[str, tuple[object, RoundRunner]] = {}
        self.rounds = RoundRunner(
            [_entry(config, name) for name in config.agent.providers],
            on_error=metrics.observe_provider_error,
            on_fallback=metrics.observe_fallback,
        )
        self.vision = False
        """Whether the first provider of the chain takes images."""
        metrics.pool_queues = self._pool_queues
        metrics.open_admissions = self._open_admissions
        self._configured(config)

    def reconfigure(self, old: RelaybotConfig, new: RelaybotConfig) -> None:
        """Serve the next rounds from ``new.agent.providers``: unchanged providers are kept,
        changed and new ones built."""
        kept = {entry.provider.name: entry for entry in self.rounds.chain}
        chain: list[ChainEntry] = []
        for name in new.agent.providers:
            entry = kept.pop(name, None)
            if entry is None or old.providers.get(name) != new.providers[name]:
                if entry is not None:
                    self._retired.append(entry)
                entry = _entry(new, name)
            chain.append(entry)
        self._retired.extend(kept.values())
        self.rounds.replace_chain(chain)
        self._configured(new)

    def rounds_for(self, config: RelaybotConfig, alias: str | None) -> RoundRunner:
        """The round runner of a chat on model alias ``alias`` (``None`` or an alias
        ``config`` does not offer: the configured chain)."""
        entry = config.agent.models.get(alias) if alias is not None else None
        if alias is None or entry is None:
            return self.rounds
        provider = config.providers[entry.provider]
        if entry.model is not None:
            provider = provider.model_copy(update={"model": entry.model})
        chain = [entry.provider, *(n for n in config.agent.providers if n != entry.provider)]
        identity = (provider, tuple(config.providers[n] for n in chain[1:]))
        known = self._aliases.get(alias)
        if known is not None and known[0] == identity:
            return known[1]
        first = ChainEntry(build_provider(entry.provider, provider), provider)
        fallbacks = [e for e in self.rounds.chain if e.provider.name != entry.provider]
        rounds = RoundRunner(
            [first, *fallbacks],
            on_error=self._metrics.observe_provider_error,
            on_fallback=self._metrics.observe_fallback,
        )
        if known is not None:
            self._retired.append(known[1].chain[0])
        self._aliases[alias] = (identity, rounds)
        return rounds

    def _configured(self, config: RelaybotConfig) -> None:
        self.vision = config.providers[config.agent.providers[0]].vision
        self._metrics.set_providers(list(config.agent.providers))

    def _built(self) -> list[ModelProvider]:
        """Every provider this chain built, once each: the chain's, those a reload left
        behind, the model aliases'."""
        aliased = [rounds.chain[0] for _, rounds in self._aliases.values()]
        built = {id(e.provider): e.provider for e in (*self.rounds.chain, *self._retired, *aliased)}
        return list(built.values())

    def _pool_queues(self) -> dict[str, PoolCounts]:
        """The requests waiting for a pooled connection (now, and in all), by provider name,
        summed over every provider this chain built (:meth:`_built`), so the counter never
        goes back at a reload and a chat on an alias is counted too."""
        totals: dict[str, PoolCounts] = {}
        for provider in self._built():
            queue = getattr(provider, "pool_queue", None)
            if queue is not None:
                total = totals.setdefault(provider.name, _Pooled())
                total.waiting += queue.waiting
                total.queued += queue.queued
        return totals

    def _open_admissions(self) -> dict[str, AdmissionCounts]:
        """The opens that waited, by provider name, summed over every provider this chain
        built (:meth:`_built`), so the counter never goes back at a reload and a chat on an
        alias is counted too."""
        totals: dict[str, AdmissionCounts] = {}
        for provider in self._built():
            admission = getattr(provider, "open_admission", None)
            if admission is not None:
                total = totals.setdefault(provider.name, _Deferred())
                total.deferred += admission.deferred
        return totals

    async def aclose(self) -> None:
        """Close every provider, in the chain or left behind by a reload (shielded)."""
        aliased = [rounds.chain[0] for _, rounds in self._aliases.values()]
        for entry in (*self.rounds.chain, *self._retired, *aliased):
            with anyio.CancelScope(shield=True):
                await entry.provider.aclose()


@dataclass
class _Deferred:
    """Opens that waited, summed over a provider name's admissions."""

    deferred: int = 0


@dataclass
class _Pooled:
    """Requests waiting for a pooled connection, summed over a provider name's pools."""

    waiting: int = 0
    queued: int = 0


def _entry(config: RelaybotConfig, name: str) -> ChainEntry:
    return ChainEntry(build_provider(name, config.providers[name]), config.providers[name])
