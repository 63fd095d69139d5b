"""What one reply's rounds added up to, for its log line and metrics (architecture §7 "Logs").

The turn runner reports every round it records (:class:`orchestrator.store.RoundRecord`); the
rounds of one conversation's reply are summed here until the daemon takes the total when the
reply is delivered. Turns of one conversation run one at a time (architecture §5), so the
conversation key identifies the reply.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.store import RoundRecord

__all__ = ["ReplyStats", "ReplyTotals"]

_Key = tuple[str, str, str | None]


@dataclass(slots=True)
class ReplyTotals:
    """One reply's rounds summed: the provider of the last round, attempts over all rounds,
    the first round's TTFT (ms), tokens (input + output) and writes sent."""

    rounds: int = 0
    provider: str | None = None
    attempts: int = 0
    ttft_ms: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    writes: int = 0

    def fields(self) -> dict[str, object]:
        """The structured fields of the reply's log line."""
        return {
            "provider": self.provider,
            "attempts": self.attempts,
            "ttft_ms": None if self.ttft_ms is None else round(self.ttft_ms),
            "tokens": self.input_tokens + self.output_tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "writes": self.writes,
        }


class ReplyStats:
    """Sums round records per conversation until :meth:`take`."""

    def __init__(self) -> None:
        self._open: dict[_Key, ReplyTotals] = {}

    def observe_round(self, record: RoundRecord) -> None:
        key = (record.channel, record.chat_id, record.thread_id)
        totals = self._open.setdefault(key, ReplyTotals())
        totals.rounds += 1
        totals.provider = record.provider or totals.provider
        totals.attempts += record.attempts
        if totals.ttft_ms is None:
            totals.ttft_ms = record.ttft_ms
        totals.input_tokens += record.input_tokens or 0
        totals.output_tokens += record.output_tokens or 0
        totals.writes += record.writes_sent

    def take(self, channel: str, chat_id: str, thread_id: str | None) -> ReplyTotals:
        """The totals of the reply that just ended there (empty when no round was recorded)."""
        return self._open.pop((channel, chat_id, thread_id), None) or ReplyTotals()
