"""``storage.retain_days`` (architecture §7 "Store"): older history and round records are
deleted at start and then every :data:`PRUNE_EVERY_SECS`."""

from __future__ import annotations

import logging
import time

import anyio

from orchestrator.store import ConversationStore

__all__ = ["PRUNE_EVERY_SECS", "prune_every_hour"]

log = logging.getLogger(__name__)

PRUNE_EVERY_SECS = 3600.0
"""How often ``storage.retain_days`` prunes, in seconds (and once at start)."""


async def prune_every_hour(store: ConversationStore, retain_days: float) -> None:
    """Delete what is older than ``retain_days`` days, now and every :data:`PRUNE_EVERY_SECS`
    until cancelled; a failed pass is one warning, and the next pass comes as planned."""
    while True:
        try:
            deleted = await store.prune(time.time() - retain_days * 86400)
            if deleted:
                log.info("storage: pruned %d row(s) older than %g day(s)", deleted, retain_days)
        except Exception as exc:
            log.warning("storage: pruning failed: %s", exc)
        await anyio.sleep(PRUNE_EVERY_SECS)
