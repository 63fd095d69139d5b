"""The leak catalogue and the redactor (DESIGN §4 "Leak catalogue").

Theory of operation
-------------------
A :class:`SecretShape` is a regular expression (the third-party ``regex`` module's syntax, which
is Python's ``re`` plus partial matching and variable-width look-behind), the literal keywords
that every match contains, and a name. A match is replaced by ``[REDACTED:<name>]``; when the
pattern has a group named ``secret``, only that group is replaced and the rest of the match (the
non-secret part: ``Bearer ``, ``token=``, ``//`` … ``@``) stays as written.

The catalogue is ordered. Redaction scans left to right: at each position the shapes are tried
in catalogue order and the first that matches wins (``sk-ant-…`` is an ``anthropic_key``, not an
``openai_key``); scanning resumes after the match. Each shape is searched on its own and the
leftmost hit of all shapes wins, ties going to the earlier shape — the same result as one big
alternation, without its cost: Python's engines run a 16-way alternation at a few MB/s, while a
literal-led single pattern runs at hundreds of MB/s.

Prefilter: a shape is searched only if one of its keywords occurs in the text (case-insensitive
keywords for shapes marked so), so text without any candidate keyword costs one ``str`` search
per keyword and no regular expression at all. A keyword counts only at a word boundary; the
patterns enforce that with ``(?<![A-Za-z0-9_])``, an ASCII boundary, so a key glued to Japanese
text is still a key while ``task-list`` holds no ``sk-`` key.

Prefix closure (for the live window): scanning with ``open_end=True`` treats the text as a prefix
of a longer text. A shape whose match is *partial* (the ``regex`` module's ``partial=True``: the
text ended while the pattern could still match) or whose match touches the end (a greedy run that
more text could extend) is *open*: everything from its start on is unsettled and the scan stops
there. Every keyword of a shape lies inside its match (for the built-in shapes: at its start,
or after the digits of a ``telegram_bot_token``), so an open match either contains a whole keyword
or the text ends with a proper prefix of one; the prefilter checks both.
Any prefix of a secret, from its first keyword character on, is therefore recognised as a possible
secret start. Every repetition is bounded, so an open match is at most a few KB long.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import regex

__all__ = [
    "BUILTIN_SHAPES",
    "Hit",
    "Redactor",
    "Scan",
    "SecretShape",
    "compile_shape",
    "marker",
]

# Not preceded by an ASCII word character: the "word boundary" a keyword must stand at.
_B = r"(?<![A-Za-z0-9_])"
_URL_KEYS = ("key", "api_key", "apikey", "token", "secret", "access_token", "password")


@dataclass(frozen=True, slots=True)
class SecretShape:
    """One kind of secret.

    Attributes:
        name: the ``<name>`` of the ``[REDACTED:<name>]`` marker.
        pattern: a ``regex``-module pattern; a group named ``secret`` limits what is replaced.
        keywords: literals that every match contains (the prefilter); empty means the pattern is
            searched in every text. For the live window each keyword must sit at or after the
            start of the match.
        ignore_case: compare ``keywords`` case-insensitively (the pattern carries its own flags).
    """

    name: str
    pattern: str
    keywords: tuple[str, ...] = ()
    ignore_case: bool = False


BUILTIN_SHAPES: tuple[SecretShape, ...] = (
    SecretShape(
        "url_credential",
        r"(?<=[?&])(?i:" + "|".join(_URL_KEYS) + r")=(?P<secret>[^\s&#\"'<>`()\[\]{}]{1,2048})",
        tuple(f"{key}=" for key in _URL_KEYS),
        ignore_case=True,
    ),
    # scheme://user:PASSWORD@host → scheme://[REDACTED:url_password]@host (the user goes too).
    SecretShape(
        "url_password", r"(?<=:)//(?P<secret>[^\s/:@?#]{0,256}:[^\s/@]{1,256})(?=@)", ("//",)
    ),
    SecretShape(
        "private_key",
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY-----"
        r"(?:[A-Za-z0-9+/=\s:,.-]{0,16384}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY-----"
        r"|[A-Za-z0-9+/=\s:,.-]{0,16384})",  # no END line: up to the first non-PEM character
        ("-----BEGIN",),
    ),
    SecretShape("anthropic_key", _B + r"sk-ant-[A-Za-z0-9_-]{20,512}", ("sk-ant-",)),
    SecretShape("openai_key", _B + r"sk-[A-Za-z0-9_-]{20,512}", ("sk-",)),
    SecretShape(
        "stripe_key",
        _B + r"(?:sk_live|sk_test|rk_live|pk_live)_[A-Za-z0-9]{10,255}",
        ("sk_live_", "sk_test_", "rk_live_", "pk_live_"),
    ),
    SecretShape("aws_access_key", _B + r"(?:AKIA|ASIA)[0-9A-Z]{16,128}", ("AKIA", "ASIA")),
    SecretShape(
        "github_token",
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    SecretShape("gitlab_token", _B + r"glpat-[A-Za-z0-9_-]{20,255}", ("glpat-",)),
    SecretShape(
        "slack_token",
        _B + r"(?:xox[A-Za-z0-9]-|xapp-)[A-Za-z0-9-]{10,255}",
        ("xox", "xapp-"),
    ),
    SecretShape("google_api_key", _B + r"AIza[0-9A-Za-z_-]{30,255}", ("AIza",)),
    SecretShape("huggingface_token", _B + r"hf_[A-Za-z0-9]{20,255}", ("hf_",)),
    SecretShape("sendgrid_key", _B + r"SG\.[A-Za-z0-9_-]{16,255}\.[A-Za-z0-9_-]{16,255}", ("SG.",)),
    SecretShape(
        "telegram_bot_token",
        # Also right after "bot", as in Bot API URLs: https://api.telegram.org/bot<token>/getMe
        r"(?:(?<=[Bb]ot)|(?<![A-Za-z0-9_]))[0-9]{6,12}:[A-Za-z0-9_-]{35,64}",
        tuple(f"{digit}:" for digit in "0123456789"),
    ),
    SecretShape(
        "jwt",
        _B + r"eyJ[A-Za-z0-9_-]{5,8192}\.[A-Za-z0-9_-]{5,8192}\.[A-Za-z0-9_-]{0,8192}",
        ("eyJ",),
    ),
    SecretShape(
        "bearer",
        _B + r"(?i:bearer)[ \t]{1,8}(?P<secret>[A-Za-z0-9._~+/-]{16,8192}={0,8})",
        ("bearer",),
        ignore_case=True,
    ),
)


def marker(name: str) -> str:
    """The text that replaces a secret of shape ``name``."""
    return f"[REDACTED:{name}]"


def compile_shape(shape: SecretShape) -> regex.Pattern[str]:
    """Compile ``shape.pattern``.

    Raises:
        ValueError: the pattern does not compile, or it matches the empty string.
    """
    try:
        compiled = regex.compile(shape.pattern)
    except regex.error as exc:
        raise ValueError(f"secret pattern {shape.name!r}: invalid regex: {exc}") from exc
    if compiled.search("") is not None:
        raise ValueError(f"secret pattern {shape.name!r}: matches the empty string")
    return compiled


@dataclass(frozen=True, slots=True)
class Hit:
    """One settled match: text ``[start, end)``; ``[secret_start, secret_end)`` is replaced."""

    name: str
    start: int
    end: int
    secret_start: int
    secret_end: int

    def replacement(self, text: str) -> str:
        return (
            text[self.start : self.secret_start]
            + marker(self.name)
            + text[self.secret_end : self.end]
        )


@dataclass(frozen=True, slots=True)
class Scan:
    """The settled part of an open scan.

    Attributes:
        text: the redacted output for the raw text ``[start, cut)``.
        cut: where the settled part ends (raw index).
        open_at: the start of the possible secret that stopped the scan, or ``None``.
        first_hit: the start of the first secret replaced in ``text``, or ``None``.
    """

    text: str
    cut: int
    open_at: int | None = None
    first_hit: int | None = None


class _Compiled:
    __slots__ = ("always", "ignore_case", "keywords", "name", "pattern", "prefixes", "secret")

    def __init__(self, shape: SecretShape) -> None:
        self.name = shape.name
        self.pattern = compile_shape(shape)
        self.secret = self.pattern.groupindex.get("secret")
        self.ignore_case = shape.ignore_case
        words = tuple(k.lower() if shape.ignore_case else k for k in shape.keywords)
        self.keywords = words
        self.prefixes = tuple({k[:i] for k in words for i in range(1, len(k))})
        self.always = not words


class Redactor:
    """Redacts text with an ordered catalogue of shapes; sans-I/O and reusable.

    Args:
        shapes: the catalogue, in order (default: :data:`BUILTIN_SHAPES`).

    Raises:
        ValueError: a shape's pattern does not compile or matches the empty string.
    """

    def __init__(self, shapes: Iterable[SecretShape] = BUILTIN_SHAPES) -> None:
        self._shapes = tuple(shapes)
        self._compiled = tuple(_Compiled(shape) for shape in self._shapes)
        # The prefilter, flattened: (keyword, shape index), per case sensitivity.
        self._always = frozenset(i for i, c in enumerate(self._compiled) if c.always)
        self._probes = tuple(
            (k, i) for i, c in enumerate(self._compiled) if not c.ignore_case for k in c.keywords
        )
        self._probes_ci = tuple(
            (k, i) for i, c in enumerate(self._compiled) if c.ignore_case for k in c.keywords
        )
        self._prefixes = tuple(p for c in self._compiled if not c.ignore_case for p in c.prefixes)
        self._prefixes_ci = tuple(p for c in self._compiled if c.ignore_case for p in c.prefixes)

    @property
    def shapes(self) -> tuple[SecretShape, ...]:
        return self._shapes

    def redact(self, text: str) -> str:
        """Replace every secret in ``text`` by its marker."""
        return self.scan(text, 0, len(text), open_end=False).text

    def candidates(self, text: str, *, open_end: bool = False) -> tuple[str, ...]:
        """Names of the shapes the keyword prefilter lets through for ``text``; with
        ``open_end`` a text ending with a proper prefix of a keyword lets that shape through.
        Empty: ``text`` has no candidate keyword and no regular expression runs on it."""
        return tuple(shape.name for shape in self._candidates(text, 0, open_end))

    def hits(self, text: str, start: int = 0) -> Iterator[Hit]:
        """The settled matches of ``text[start:]`` in order (characters before ``start`` serve
        as look-behind context only)."""
        for hit in self._hits(text, start, open_end=False):
            if isinstance(hit, Hit):
                yield hit

    def scan(self, text: str, start: int, stop: int, *, open_end: bool) -> Scan:
        """Redact ``text[start:stop]`` as far as it is settled.

        With ``open_end`` the text may continue: the scan ends before ``stop`` at the first
        possible secret that reaches the end of ``text``, and at the start of any match that
        crosses ``stop``. ``start`` must be a settled position (no match spans it).

        Returns:
            the output for ``text[start:cut]``; joining the outputs of consecutive scans gives
            :meth:`redact` of the whole text, whatever follows.
        """
        out: list[str] = []
        last = start
        open_at: int | None = None
        first_hit: int | None = None
        for hit in self._hits(text, start, open_end=open_end):
            if isinstance(hit, int):  # a possible secret starts here and reaches the end
                if hit < stop:
                    stop = open_at = hit
                break
            if hit.start >= stop:
                break
            if hit.end > stop:
                stop = hit.start
                break
            out.append(text[last : hit.start])
            out.append(hit.replacement(text))
            last = hit.end
            if first_hit is None:
                first_hit = hit.start
        out.append(text[last:stop])
        return Scan("".join(out), stop, open_at, first_hit)

    # -- the merge of per-shape searches ----------------------------------------------------

    def _candidates(self, text: str, start: int, open_end: bool) -> list[_Compiled]:
        region = text[start:] if start else text
        lowered = region.lower() if self._probes_ci else ""
        found = set(self._always)
        for keyword, index in self._probes:
            if keyword in region:
                found.add(index)
        for keyword, index in self._probes_ci:
            if keyword in lowered:
                found.add(index)
        if open_end and (region.endswith(self._prefixes) or lowered.endswith(self._prefixes_ci)):
            for index, shape in enumerate(self._compiled):  # rare: which shapes end it
                if (lowered if shape.ignore_case else region).endswith(shape.prefixes):
                    found.add(index)
        return [self._compiled[index] for index in sorted(found)]

    def _hits(self, text: str, start: int, *, open_end: bool) -> Iterator[Hit | int]:
        """Settled hits in order; with ``open_end`` a final ``int`` marks an open match."""
        shapes = self._candidates(text, start, open_end)
        if not shapes:
            return
        n = len(text)
        heads = [shape.pattern.search(text, start, partial=open_end) for shape in shapes]
        while True:
            best = -1
            for index, match in enumerate(heads):
                if match is not None and (best < 0 or match.start() < heads[best].start()):
                    best = index
            if best < 0:
                return
            match = heads[best]
            assert match is not None
            begin, end = match.span()
            if open_end and (match.partial or end >= n):
                yield begin
                return
            if end == begin:  # an empty match of a look-around pattern: not a secret
                heads[best] = shapes[best].pattern.search(text, begin + 1, partial=open_end)
                continue
            shape = shapes[best]
            secret = match.span(shape.secret) if shape.secret is not None else (begin, end)
            if secret[0] < 0:
                secret = (begin, end)
            yield Hit(shape.name, begin, end, secret[0], secret[1])
            for index, head in enumerate(heads):
                if head is not None and head.start() < end:
                    heads[index] = shapes[index].pattern.search(text, end, partial=open_end)
