"""Config models of the chat controls (architecture §5 "Chat controls"): the model aliases a chat
may switch between (``agent.models``), a provider's prices (``providers.X.prices``) and the
budgets and rate limits (``limits``). Unknown keys are errors; messages never quote the input
value."""

from __future__ import annotations

from pydantic import Field

from config.fields import Strict

__all__ = ["LimitSet", "LimitsConfig", "ModelAlias", "Prices"]


class ModelAlias(Strict):
    """One model a chat may switch to with ``/model NAME``."""

    provider: str = Field(description="a name from `providers`: the API that serves the model")
    model: str | None = Field(
        default=None, description="model name sent to the API (default: the provider's model)"
    )


class Prices(Strict):
    """What a provider charges, per million tokens (in one currency, shown as ``$``)."""

    input: float = Field(default=0.0, ge=0, description="per million input (prompt) tokens")
    cached_input: float | None = Field(
        default=None,
        ge=0,
        description="per million cached input tokens (default: the input price)",
    )
    output: float = Field(default=0.0, ge=0, description="per million output tokens")


class LimitSet(Strict):
    """Caps of one user or one chat; an absent key is no cap."""

    tokens_per_day: int | None = Field(
        default=None, gt=0, description="input + output tokens per UTC day"
    )
    cost_per_month: float | None = Field(
        default=None, gt=0, description="cost (from providers.X.prices) per UTC calendar month"
    )
    messages_per_minute: int | None = Field(
        default=None, gt=0, description="messages answered per minute"
    )


class LimitsConfig(Strict):
    """Budgets and rate limits, checked before the model is asked (architecture §5 "Budgets")."""

    user: LimitSet = Field(default_factory=LimitSet, description="caps of each user")
    chat: LimitSet = Field(default_factory=LimitSet, description="caps of each chat or topic")
    admins_exempt: bool = Field(
        default=True, description="the channel's admins are not held to these caps"
    )
