"""The outbound policy of the whole daemon, built once from ``policy`` config (architecture §4, §6).

It owns what every reply shares — the compiled catalogue (built-in shapes, then
``extra_secret_patterns``, then the terms of ``redact`` guardrails), the hook and the
guardrails — and makes one :class:`~orchestrator.policy.reply.ReplyPolicy` per reply. The hook
is imported here only to check it (and for :meth:`ReplyPolicy.guard_piece`'s in-process call);
the daemon runs it in :attr:`OutboundPolicy.hooks`, worker processes it starts and stops around
its run (architecture §4 "The hook"). Its
:meth:`OutboundPolicy.redact` serves logs, notices and anything else sent outside a reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from channels.telegram.format import markdown_to_telegram
from config.models import PolicyConfig, SecretPatternConfig
from orchestrator.policy.catalogue import (
    BUILTIN_SHAPES,
    EXTRA_PATTERN_TIMEOUT_SECS,
    Redactor,
    SecretShape,
    check_backtracking,
)
from orchestrator.policy.errors import PolicyError
from orchestrator.policy.guardrails import TermList, build_guardrails
from orchestrator.policy.hook import Hook, load_hook
from orchestrator.policy.reply import Renderer, ReplyPolicy

if TYPE_CHECKING:  # imported where built: the deciding cores of this package stay sans-I/O
    from orchestrator.policy.hook_pool import HookWorkers

__all__ = ["OutboundPolicy", "extra_shapes", "telegram_visible_text"]


def telegram_visible_text(markdown: str) -> str:
    """The text Telegram displays for the formatted final ``markdown`` (today's only renderer
    of a formatted final; architecture §3 "Formatting")."""
    return markdown_to_telegram(markdown).text


def extra_shapes(patterns: Sequence[SecretPatternConfig]) -> tuple[SecretShape, ...]:
    """The shapes of ``policy.extra_secret_patterns``, each checked.

    A pattern's ``keywords`` are only a hint: they do not gate its search, so a pattern whose
    matches lack them (``zz[0-9]{8}`` with ``keywords: [yy]``) still matches. Each search runs
    with a time bound of :data:`EXTRA_PATTERN_TIMEOUT_SECS`.

    Raises:
        PolicyError: a pattern does not compile, matches the empty string or backtracks
            catastrophically; the key path and the message name the pattern.
    """
    shapes = []
    for index, pattern in enumerate(patterns):
        shape = SecretShape(pattern.name, pattern.regex, timeout_secs=EXTRA_PATTERN_TIMEOUT_SECS)
        try:
            Redactor((shape,))
            check_backtracking(shape)
        except ValueError as exc:
            raise PolicyError(f"policy.extra_secret_patterns[{index}].regex", str(exc)) from exc
        shapes.append(shape)
    return tuple(shapes)


class OutboundPolicy:
    """Makes the per-reply policies.

    Args:
        redactor: the catalogue (default: the built-in shapes).
        hook: the ``on_message_sending`` hook, called in-process by ``guard_piece`` alone.
        hooks: the hook's worker processes (not started: the daemon starts and stops them);
            what the delivery driver awaits.
        guardrails: the guardrails; the shapes of ``redact`` lists must be in ``redactor``
            (:meth:`from_config` arranges that).
        render: the renderer of formatted finals, as displayed (default: Telegram's); every
            delivered piece is also checked as it displays.
    """

    def __init__(
        self,
        redactor: Redactor | None = None,
        *,
        hook: Hook | None = None,
        hooks: HookWorkers | None = None,
        guardrails: Sequence[TermList] = (),
        render: Renderer | None = None,
        hook_timeout_secs: float = 5.0,
    ) -> None:
        self.hook_timeout_secs = hook_timeout_secs
        self.hooks = hooks
        self.redactor = redactor if redactor is not None else Redactor()
        self.render = render if render is not None else telegram_visible_text
        self.hook = hook
        self.guardrails = tuple(guardrails)

    @classmethod
    def from_config(cls, config: PolicyConfig | None = None) -> OutboundPolicy:
        """Build from the ``policy`` section (default: built-in shapes only).

        Raises:
            PolicyError: the hook cannot be imported, or an extra pattern is unusable.
        """
        config = config if config is not None else PolicyConfig()
        guardrails = build_guardrails(config.guardrails)
        terms = tuple(shape for g in guardrails if (shape := g.shape()) is not None)
        shapes = (*BUILTIN_SHAPES, *extra_shapes(config.extra_secret_patterns), *terms)
        hook = hooks = None
        if config.on_message_sending:
            from orchestrator.policy.hook_pool import HookWorkers

            hook = load_hook(config.on_message_sending)
            hooks = HookWorkers(
                config.on_message_sending,
                workers=config.hook_workers,
                timeout_secs=config.hook_timeout_secs,
            )
        return cls(
            Redactor(shapes),
            hook=hook,
            hooks=hooks,
            guardrails=guardrails,
            hook_timeout_secs=config.hook_timeout_secs,
        )

    def new_reply(self, channel: str, chat_id: str, render: Renderer | None = None) -> ReplyPolicy:
        """A fresh policy for one reply in ``channel``/``chat_id``; ``render``: what that
        channel's reader sees of a formatted text (``Channel.visible_text``; default: this
        policy's renderer)."""
        return ReplyPolicy(
            self.redactor,
            hook=self.hook,
            hooks=self.hooks,
            guardrails=self.guardrails,
            channel=channel,
            chat_id=chat_id,
            render=render if render is not None else self.render,
            hook_timeout_secs=self.hook_timeout_secs,
        )

    def redact(self, text: str) -> str:
        """Redact ``text`` on its own (logs, notices, console output)."""
        return self.redactor.redact(text)
