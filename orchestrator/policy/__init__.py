"""The outbound policy (architecture §4): every text that leaves for a chat crosses it.

- :mod:`~orchestrator.policy.catalogue`: the leak catalogue and the :class:`Redactor`;
- :mod:`~orchestrator.policy.window`: the live redaction window (sans-I/O);
- :mod:`~orchestrator.policy.pieces`: redaction of delivered pieces with history context;
- :mod:`~orchestrator.policy.hook`: the ``on_message_sending`` hook;
- :mod:`~orchestrator.policy.guardrails`: ``term_list`` guardrails;
- :mod:`~orchestrator.policy.reply`: :class:`ReplyPolicy`, one per reply;
- :mod:`~orchestrator.policy.outbound`: :class:`OutboundPolicy`, built from config.
"""

from orchestrator.policy.catalogue import BUILTIN_SHAPES, Redactor, SecretShape, marker
from orchestrator.policy.errors import PolicyError
from orchestrator.policy.guardrails import REFUSAL_NOTICE, TermList
from orchestrator.policy.outbound import OutboundPolicy
from orchestrator.policy.reply import ReplyPolicy
from orchestrator.policy.window import RedactionWindow

__all__ = [
    "BUILTIN_SHAPES",
    "REFUSAL_NOTICE",
    "OutboundPolicy",
    "PolicyError",
    "RedactionWindow",
    "Redactor",
    "ReplyPolicy",
    "SecretShape",
    "TermList",
    "marker",
]
