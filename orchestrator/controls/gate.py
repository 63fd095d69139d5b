"""The budget gate (architecture §5 "Budgets"): before a message's turn asks the model, the
sender's and the chat's sums are read from the store and the message is counted against its
minute; :mod:`orchestrator.controls.budgets` decides."""

from __future__ import annotations

from channels.base import InboundMessage
from config.controls import LimitsConfig, LimitSet
from orchestrator.chats.roles import Presser, Roles
from orchestrator.controls.budgets import (
    Refusal,
    Scope,
    Spent,
    minute_window,
    rate_refusal,
    refusal,
)
from orchestrator.controls.usage import day_start, month_start
from orchestrator.store.control_rows import ControlRows

__all__ = ["limit_refusal"]


def _capped(limits: LimitSet) -> bool:
    return any(
        v is not None
        for v in (limits.tokens_per_day, limits.cost_per_month, limits.messages_per_minute)
    )


async def limit_refusal(
    rows: ControlRows,
    limits: LimitsConfig,
    roles: Roles,
    channel: str,
    message: InboundMessage,
    now: float,
) -> Refusal | None:
    """The refusal of ``message`` (a cap of its sender or chat is reached: its line and when
    the cap resets), or ``None``: it may be answered, and it was counted against its minute."""
    if limits.admins_exempt and roles.is_admin(Presser(message.sender_id, message.sender_handle)):
        return None
    scopes: list[tuple[Scope, LimitSet, dict[str, str]]] = [
        ("user", limits.user, {"user_id": message.sender_id}),
        ("chat", limits.chat, {"chat_id": message.chat_id}),
    ]
    for scope, caps, who in scopes:
        if not _capped(caps):
            continue
        today = await rows.usage_totals(day_start(now), channel=channel, **who)
        month = today
        if caps.cost_per_month is not None:
            month = await rows.usage_totals(month_start(now), channel=channel, **who)
        refused = refusal(scope, caps, Spent(today, month), now)
        if refused is not None:
            return refused
    for scope, caps, who in scopes:
        if caps.messages_per_minute is None:
            continue
        key = f"{scope}:{channel}:{next(iter(who.values()))}"
        if not await rows.take_message(key, minute_window(now), caps.messages_per_minute):
            return rate_refusal(scope, caps.messages_per_minute, now)
    return None
