"""Guardrails (architecture §4 "Guardrails"): screens of the complete text of a reply.

``term_list`` finds whole-word terms, case-insensitively. With ``action: deny`` a hit refuses
the reply: it is replaced by :data:`REFUSAL_NOTICE` and the round is recorded as refused. With
``action: redact`` each term is replaced by ``[REDACTED:term]``; such a list becomes one more
shape at the end of the catalogue, so the live window masks terms exactly as it masks secrets.

A guardrail that ``holds_stream`` (the default) keeps the whole round from being streamed: the
complete text is screened, then released or refused. One that does not screens the complete
text after the round, when part of it may already have been shown; a refusal then replaces what
was shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

import regex

from config.models import GuardrailConfig
from orchestrator.policy.catalogue import SecretShape

__all__ = ["REFUSAL_NOTICE", "TERM_MARKER_NAME", "TermList", "build_guardrails"]

REFUSAL_NOTICE = "⚠️ This answer was withheld by policy."
"""What a refused reply shows instead."""
TERM_MARKER_NAME = "term"
"""Redacted terms read ``[REDACTED:term]``."""

_WORD = re.compile(r"[A-Za-z0-9_]")


def _term_pattern(term: str) -> str:
    words = term.split()
    body = r"\s+".join(regex.escape(word) for word in words)
    if _WORD.fullmatch(words[0][0]):
        body = r"(?<![A-Za-z0-9_])" + body
    if _WORD.fullmatch(words[-1][-1]):
        body += r"(?![A-Za-z0-9_])"
    return body


class TermList:
    """A ``term_list`` guardrail.

    Args:
        terms: the terms; each matches as a whole word, case-insensitively, with any whitespace
            between its words.
        action: ``deny`` refuses the reply, ``redact`` replaces the terms.
        holds_stream: hold each round until its complete text is screened.

    Raises:
        ValueError: no term has any non-space character.
    """

    def __init__(
        self,
        terms: Iterable[str],
        action: Literal["deny", "redact"] = "deny",
        holds_stream: bool = True,
    ) -> None:
        self.terms = tuple(sorted({t.strip() for t in terms if t.strip()}, key=len, reverse=True))
        if not self.terms:
            raise ValueError("term_list needs at least one non-empty term")
        self.action = action
        self.holds_stream = holds_stream
        self.pattern = "(?i:" + "|".join(_term_pattern(t) for t in self.terms) + ")"
        self._compiled = regex.compile(self.pattern)

    @classmethod
    def from_config(cls, config: GuardrailConfig) -> TermList:
        return cls(config.terms, config.action, config.holds_stream)

    def refuses(self, text: str) -> bool:
        """Whether a ``deny`` list refuses ``text`` (a ``redact`` list never refuses)."""
        return self.action == "deny" and self._compiled.search(text) is not None

    def shape(self) -> SecretShape | None:
        """The catalogue shape of a ``redact`` list (``None`` for ``deny``)."""
        if self.action != "redact":
            return None
        keywords = tuple({t.split()[0].lower() for t in self.terms})
        return SecretShape(TERM_MARKER_NAME, self.pattern, keywords, ignore_case=True)


def build_guardrails(configs: Iterable[GuardrailConfig]) -> tuple[TermList, ...]:
    """The guardrails of the ``policy.guardrails`` config list."""
    return tuple(TermList.from_config(config) for config in configs)
