"""The built-in secret shapes and the checks of extra ones (architecture §4 "Leak catalogue",
"Shapes are specific"); data and pure functions.

Each :class:`SecretShape` is a pattern in the third-party ``regex`` module's syntax (Python's
``re`` plus partial matching, possessive quantifiers and time bounds), its keywords, and for the
live window what may still extend a complete match (``open_tail``). The patterns are specific:
a PEM block needs its base64 body; ``bearer``, ``openai_key``, ``slack_token``,
``aws_access_key`` and the generic ``?key=`` need token-like values, so lookalikes in prose
(``bearer tokens``, ``sk-learn-compatible``, ``xoxo-hugs-and-kisses``,
``ASIAPACIFIC2024SUMMIT``, ``?key=pydoc``) stay.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

__all__ = [
    "BUILTIN_SHAPES",
    "EXTRA_PATTERN_TIMEOUT_SECS",
    "MARKER_OPEN",
    "MARKER_PATTERN",
    "SecretShape",
    "check_backtracking",
    "compile_shape",
    "inert",
    "marker",
    "may_be_inert",
]

# Not preceded by an ASCII letter or digit: the "word boundary" a keyword must stand at. "_" counts
# as a boundary (a Markdown emphasis delimiter: ``_sk-ant-…_`` shows the key in italics). A prefix
# specific enough to stand alone (``sk-ant-``, ``sk-proj-``, ``ghp_``, ``github_pat_``, ``AKIA``,
# ``xoxb-``, ``glpat-``) needs no boundary: ``id1sk-ant-…`` is a key glued to the word before it.
# A marker stands where a secret ended in a letter or digit, so it is no boundary either: what
# followed the secret reads the same after redaction (``[REDACTED:aws_access_key]sk-proj-…``
# is no key where ``AKIA…EXAMPLEsk-proj-…`` was none), and redaction stays idempotent.
_B = r"(?<![A-Za-z0-9])(?<!\[REDACTED:[a-z][a-z0-9_]{0,63}\])"
# The prefixes that need no boundary before them (see _B).
_GLUED = r"(?i:sk-ant-)|sk-proj-|ghp_|github_pat_|AK[Il1]A|xoxb-|g[lI1]pat-"
# Glued to a word before it, "sk-ant-" must open a real key's body ("api03-", "admin01-"), so
# "multitask-ant-colony-…" is prose; a glued "sk-proj-" key is 80 characters at least
# ("risk-proj-2024-…" is a file name).
_ANT_BODY = r"(?:" + _B + r"(?i:sk-ant-)|(?i:sk-ant-)(?=(?i:api|admin|oat|sid)[0-9]{2}-))"
# A marker standing where a secret would: never a secret itself (``scheme://[REDACTED:…]@host``).
MARKER_PATTERN = r"\[REDACTED:[a-z][a-z0-9_]{0,63}\]"
_URL_VALUE = r"[^\s&#\"'<>`()\[\]{}]"
_PASSWORD = r"(?:(?!\[REDACTED:)[^\s\"'<>`]){1,256}?"
_AUTHORITY_END = r"(?=[^A-Za-z0-9.@-]|\Z)"
# A host as one reads it: a dotted name, a name with a port, localhost.
_HOST = (
    r"(?:(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z0-9-]{1,63}(?::[0-9]{1,5})?"
    r"|[A-Za-z0-9][A-Za-z0-9-]{0,62}:[0-9]{1,5}|localhost)" + _AUTHORITY_END
)
_ANY_HOST = r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}" + _AUTHORITY_END
_URL_KEYS = ("key", "api_key", "apikey", "token", "secret", "access_token", "password")
# What may stand before a line of a PEM block: indentation (a key inside YAML, JSON or a code
# block) and Markdown quote prefixes ("> ", nested).
_Q = r"[ \t]{0,32}(?:>[ \t]{0,4}){0,8}"
# Between the header and the body and between body lines: a line end, or spaces where a key was
# flattened onto one line (``"-----BEGIN … KEY----- MIIE… -----END … KEY-----"``).
_NL = r"(?:\r\n|[\n\r])"
_PEM_LINE_END = rf"(?:[ \t]*(?:{_NL}|\Z)|[ \t]+)"
# A header as a reader reads it: four or five dashes, any case, spaces doubled.
_PEM_LABEL = r"[ \t]{1,4}(?:[A-Z0-9]{1,10}[ \t]{1,4}){0,4}PRIVATE[ \t]{1,4}KEY(?:[ \t]{1,4}BLOCK)?"
_PEM_BEGIN = r"-{4,5}(?i:BEGIN" + _PEM_LABEL + r")-{4,5}"
_PEM_END = r"-{4,5}(?i:END" + _PEM_LABEL + r")-{4,5}"
_B64 = r"[A-Za-z0-9+/=]"


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
        timeout_secs: the time bound of one search (``None``: none; the built-in shapes are
            linear). A search that times out redacts the text it searched (see
            :class:`Redactor`).
        open_tail: for the live window, a pattern of what may follow a complete match that
            more text could still extend (an END line not yet complete after a PEM body): a
            match followed by such a tail up to the end of the text is open.
        lead: a pattern (the standard ``re`` module's syntax) that matches at the start of
            every full match and of every partial match other than the empty one at the end of
            the text: a necessary condition derived from ``pattern``, searched first (at
            hundreds of MB/s) so that ``pattern`` is tried only from where it could match
            (:class:`~orchestrator.policy.searches.CompiledShape`). ``None``: none.
    """

    name: str
    pattern: str
    keywords: tuple[str, ...] = ()
    ignore_case: bool = False
    timeout_secs: float | None = None
    open_tail: str | None = None
    lead: str | None = None


BUILTIN_SHAPES: tuple[SecretShape, ...] = (
    SecretShape(
        "url_credential",
        # after "?", "&" or "#" (an OAuth implicit-grant fragment: #access_token=…); the generic
        # "key" only with a token-like value (a digit and 8 characters, or 20): "?key=pydoc"
        # is a search.
        r"(?<=[?&#])(?:(?i:" + "|".join(k for k in _URL_KEYS if k != "key") + r")="
        rf"(?P<secret>{_URL_VALUE}{{1,2048}})"
        rf"|(?i:key)=(?P<secret>(?={_URL_VALUE}{{0,2047}}[0-9]){_URL_VALUE}{{8,2048}}"
        rf"|{_URL_VALUE}{{20,2048}}))",
        tuple(f"{key}=" for key in _URL_KEYS),
        ignore_case=True,
        # A key (3 to 12 letters, or their case variants, none a space or "=") and "=" after
        # one of "?&#", or a part of a key that reaches the end of the text.
        lead=r"(?<=[?&#])(?:[^\s=]{3,12}=|[^\s=]{1,12}\Z)",
    ),
    # scheme://user:PASSWORD@host → scheme://[REDACTED:url_password]@host (the user goes too).
    # The password may hold "/" and "@" (written unencoded): the match ends at the first "@"
    # before a host that reads as one (a dotted name, a port, localhost) and ends the authority
    # (RFC 3986 §3.2), else at the first "@" before any host name; so a path, a query or a text
    # after the URL that holds another "@" stays. Neither part holds a marker: text already
    # redacted never reads as a user or a password.
    SecretShape(
        "url_password",
        r"(?<=[A-Za-z0-9]:)//"
        r"(?P<secret>(?:(?!\[REDACTED:)[^\s/:@?#]){0,256}:(?![0-9]{1,5}(?:/|\Z))"
        rf"(?:{_PASSWORD}(?=@{_HOST})|{_PASSWORD}(?=@{_ANY_HOST})))@",
        ("//",),
        # A host that reaches the end may still be followed by "@" (then it was password); and
        # a match that ended at "@" before a host that does not end the authority may still
        # give way to a longer password while password characters run on to the end (a later
        # "@" and host: "//:pw@cache:6379@" + "other.example" has the password "pw@cache:6379").
        open_tail=r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}(?::[0-9]{0,5})?"
        rf"|(?!{_HOST})[^\s\"'<>`]{{0,256}}",
        # The user is the whole run after "//" of characters other than "/:@?#" and spaces (":"
        # ends it): that run, spaces let in (a superset), up to 256 long and then ":" or the end
        # of the text; or the text ends inside the "//". Led by "/", not by the look-behind, so
        # the standard engine skips to each "/".
        lead=r"/(?:/(?<=[A-Za-z0-9]://)[^/:@?#]{0,256}(?::|\Z)|(?<=[A-Za-z0-9]:/)\Z)",
    ),
    SecretShape(
        "private_key",
        # A header line, optional RFC 1421/4880 header lines, then a base64 body of at least one
        # line of 16 characters; each line may carry a Markdown quote prefix ("> "). A header
        # mentioned in prose (no body on the next line) is no match.
        _PEM_BEGIN
        + _PEM_LINE_END
        + rf"(?:{_Q}[A-Za-z0-9-]{{1,40}}: [^\r\n]{{0,200}}{_NL}){{0,8}}"  # Proc-Type:, Version:
        + rf"(?:{_Q}[ \t]*{_NL})?"
        + rf"{_Q}{_B64}{{16,4096}}"  # the body's first line: 16 base64 characters at least
        # later lines: any length after a line end; on one flattened line, chunks of 16 at least
        # (so a word after the block is never taken as a chunk of it)
        + rf"(?:[ \t]*(?:{_NL}|\Z){_Q}{_B64}{{1,4096}}|[ \t]+{_B64}{{16,4096}}){{0,400}}"
        + rf"(?:{_PEM_LINE_END}{_Q}{_PEM_END})?",
        ("----begin",),
        ignore_case=True,
        # what more text could extend: body lines, then an END line begun
        open_tail=rf"(?:(?:[ \t]*{_NL}|[ \t]+)[ \t>]*{_B64}{{0,4096}})*[ \t]*{_NL}?[ \t>]*"
        r"(?:-{1,5}(?i:E(?:N(?:D(?:[ \t][A-Z0-9 \t]{0,60}-{0,5})?)?)?)?)?",
    ),
    # "Sk-ant-", "SK-ANT-": a capital look-alike (Cyrillic "Ѕ") reads as a capital.
    SecretShape(
        "anthropic_key", _ANT_BODY + r"[A-Za-z0-9_-]{20,512}", ("sk-ant-",), ignore_case=True
    ),
    # A digit and a capital letter somewhere: real keys have both, "sk-learn-compatible-…" not.
    SecretShape(
        "openai_key",
        r"(?:" + _B + r"sk-|sk-(?=proj-[A-Za-z0-9_-]{80}))"
        r"(?=[A-Za-z0-9_-]{0,511}[0-9])(?=[A-Za-z0-9_-]{0,511}[A-Z])[A-Za-z0-9_-]{20,512}",
        ("sk-",),
    ),
    SecretShape(
        "stripe_key",
        _B + r"(?:sk_live|sk_test|rk_live|pk_live)_[A-Za-z0-9]{10,255}",
        ("sk_live_", "sk_test_", "rk_live_", "pk_live_"),
    ),
    # Exactly 16 capitals and digits after the prefix ("ASIAPACIFIC2024SUMMIT" is no key id);
    # "AKlA" and "AK1A" read as "AKIA" in many fonts.
    SecretShape(
        "aws_access_key",
        # a glued key right after it ("…EXAMPLEsk-ant-…") is a key of its own, not more of this
        r"(?:AK[Il1]A|" + _B + r"ASIA)[0-9A-Z]{16}(?!(?!" + _GLUED + r")[0-9A-Z])",
        ("AKIA", "AKlA", "AK1A", "ASIA"),
    ),
    SecretShape(
        "github_token",
        r"(?:(?:ghp_|" + _B + r"gh[ousr]_)[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    SecretShape("gitlab_token", r"g[lI1]pat-[A-Za-z0-9_-]{20,255}", ("glpat-", "gIpat-", "g1pat-")),
    # xoxb-/xoxp-/xoxa-/xoxr-/xoxs-/xoxe- and xapp- tokens start with a numeric segment
    # ("xoxo-hugs-and-kisses" is prose).
    SecretShape(
        "slack_token",
        r"(?:xoxb|" + _B + r"(?:xox[aeprs]|xapp))-[0-9]{1,20}-[A-Za-z0-9-]{8,255}",
        ("xox", "xapp-"),
    ),
    SecretShape("google_api_key", _B + r"AIza[0-9A-Za-z_-]{30,255}", ("AIza",)),
    SecretShape("huggingface_token", _B + r"hf_[A-Za-z0-9]{20,255}", ("hf_",)),
    SecretShape("sendgrid_key", _B + r"SG\.[A-Za-z0-9_-]{16,255}\.[A-Za-z0-9_-]{16,255}", ("SG.",)),
    SecretShape(
        "telegram_bot_token",
        # Also right after "bot", as in Bot API URLs: https://api.telegram.org/bot<token>/getMe
        r"(?:(?<=[Bb]ot)|" + _B + r")[0-9]{6,12}:[A-Za-z0-9_-]{35,64}",
        tuple(f"{digit}:" for digit in "0123456789"),
        # digits and ":", or digits that reach the end of the text
        lead=r"[0-9]{1,12}(?::|\Z)",
    ),
    SecretShape(
        "jwt",
        _B + r"eyJ[A-Za-z0-9_-]{5,8192}\.[A-Za-z0-9_-]{5,8192}\.[A-Za-z0-9_-]{0,8192}",
        ("eyJ",),
    ),
    # A token-like value: 16 or more token characters with a digit among them ("bearer
    # tokens", "Bearer authentication-scheme" stay).
    SecretShape(
        "bearer",
        _B + r"(?i:bearer)[ \t]{1,8}(?P<secret>(?=[A-Za-z._~+/-]{0,8191}[0-9])"
        r"[A-Za-z0-9._~+/-]{16,8192}={0,8})",
        ("bearer",),
        ignore_case=True,
    ),
)


EXTRA_PATTERN_TIMEOUT_SECS = 0.05
"""The time bound of one search of an extra pattern from config; a tenth of it once the pattern
has run out of time (it is known to stall), so that no chat waits on it for long."""
_PROBE_TIMEOUT_SECS = 0.25
_PROBE_LENGTHS = (28, 4000)


def check_backtracking(shape: SecretShape) -> None:
    """Reject a pattern that backtracks catastrophically (``(a|aa)+b``): it is run on probe
    texts built from its own literal characters (runs of one character, of a character and a
    space, 28 and 4000 long, then a character no pattern expects), each with a time bound.

    Raises:
        ValueError: a probe took longer than 0.25 s.
    """
    compiled = compile_shape(shape)
    chars = {c for c in shape.pattern if c.isalnum() or c in " -_.:/@+="} | set("a0 -_.")
    for char in sorted(chars):
        for length in _PROBE_LENGTHS:
            for probe in (char * length, (char + " ") * length, (char + "0") * length):
                try:
                    compiled.search(probe + "\x00", timeout=_PROBE_TIMEOUT_SECS)
                    compiled.search(probe, partial=True, timeout=_PROBE_TIMEOUT_SECS)
                except TimeoutError:
                    raise ValueError(
                        f"secret pattern {shape.name!r}: backtracks catastrophically "
                        f"({length} characters take more than {_PROBE_TIMEOUT_SECS} s)"
                    ) from None


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


MARKER_OPEN = "[REDACTED:"
"""How every marker begins."""
_MARKER = regex.compile(MARKER_PATTERN)
_MARKERS = regex.compile(rf"\s*(?:{MARKER_PATTERN}\s*)+")
_MARKER_CHARS = 75  # the longest marker


def inert(text: str, begin: int, end: int) -> bool:
    """Whether ``text[begin:end]`` is made of markers, or lies inside one."""
    if _MARKERS.fullmatch(text, begin, end) is not None:
        return True
    opener = text.rfind(MARKER_OPEN, max(0, begin - _MARKER_CHARS), begin + len(MARKER_OPEN))
    if opener < 0:
        return False
    inside = _MARKER.match(text, opener)
    return inside is not None and inside.end() >= end


def may_be_inert(text: str, start: int) -> bool:
    """Whether :func:`inert` may hold for a span of ``text`` that begins at or after ``start``:
    it holds only where a marker opens inside the span or at most a marker's length before it,
    so not when none opens from ``start - 75`` on (a search of the region, not of the whole
    text)."""
    return text.find(MARKER_OPEN, max(0, start - _MARKER_CHARS)) >= 0
