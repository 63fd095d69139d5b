"""Secret samples and text generators for the outbound-policy tests (all secrets are fake).

Each sample is ``(shape name, text as written, the secret part a user must never see)``; the
text may hold a non-secret part that stays (``Bearer ``, ``?token=``, ``postgres://`` … ``@``).
The generators draw secret bodies from an alphabet (odd digits, rare capitals) that the prose
and the negatives never use, so "no 5-character window of a secret is visible" is exact.
"""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = [
    "NEGATIVES",
    "SAMPLES",
    "Planted",
    "planted_secrets",
    "texts_with_secrets",
    "windows",
]

_PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nQXZJVWKY13579QXZJVWKY13579QXZJVWKY1357=="
SAMPLES: tuple[tuple[str, str, str], ...] = (
    ("url_credential", "https://api.example.org/v1/cb?token=QXZJ7VWKY9Z3", "QXZJ7VWKY9Z3"),
    ("url_credential", "https://x.example/?a=1&API_KEY=abcDEF123ghi456", "abcDEF123ghi456"),
    ("url_password", "postgres://admin:hunter2QXZ@db.internal:5432/app", "admin:hunter2QXZ"),
    ("url_password", "redis://:s3cr3tQXZ@cache:6379", ":s3cr3tQXZ"),
    (
        "private_key",
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----",
    ),
    (
        "private_key",
        f"-----BEGIN PRIVATE KEY-----\n{_PEM_BODY}",
        f"-----BEGIN PRIVATE KEY-----\n{_PEM_BODY}",
    ),
    ("anthropic_key", "sk-ant-api03-" + "AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ", None),
    ("openai_key", "sk-proj-Abc123Def456Ghi789Jkl012Mno345", None),
    ("openai_key", "sk-" + "Q" * 20 + "7" * 28, None),
    ("stripe_key", "sk_live_51HqQXZJVWKY13579abcd", None),
    ("stripe_key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", None),
    ("stripe_key", "rk_live_" + "Z9" * 12, None),
    ("stripe_key", "pk_live_" + "K7" * 12, None),
    ("aws_access_key", "AKIAIOSFODNN7EXAMPLE", None),
    ("aws_access_key", "ASIAQXZJVWKY13579QXZ", None),
    ("github_token", "ghp_" + "a1B2c3D4e5" * 3 + "QXZJVW", None),
    ("github_token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", None),
    ("gitlab_token", "glpat-QXZJVWKY13579abcdefgh", None),
    ("slack_token", "xoxb-123456789012-QXZJVWKY13579", None),
    ("slack_token", "xapp-1-A0123QXZJ-9876543210", None),
    ("google_api_key", "AIzaSyD-QXZJVWKY13579abcdefghijklmnopq", None),
    ("huggingface_token", "hf_QXZJVWKY13579abcdefghijklmnopqrst", None),
    ("sendgrid_key", "SG.QXZJVWKY13579abcdefg.hijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX", None),
    ("telegram_bot_token", "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1", None),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        None,
    ),
    ("bearer", "Authorization: Bearer QXZJVWKY13579abcdefgh.ij-kl~mn+op/qr==", None),
    ("bearer", "bearer\tQXZJVWKY13579ZZZZZZZZ", None),
)
"""Positive samples; ``None`` as the secret part means: the whole text from its keyword on."""


def secret_part(text: str, secret: str | None) -> str:
    """The part of a sample a user must never see."""
    if secret is not None:
        return secret
    for lead in ("Authorization: Bearer ", "bearer\t"):
        if text.startswith(lead):
            return text[len(lead) :]
    return text


NEGATIVES: tuple[str, ...] = (
    "123e4567-e89b-12d3-a456-426614174000",
    "commit da39a3ee5e6b4b0d3255bfef95601890afd80709 fixed it",
    "![chart](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==)",
    "https://www.example.com/some/very/long/path/with-many-segments/and-more/segments/here"
    "?page=2&sort=desc&q=hello%20world&tokens=12&key_id=7#section-3",
    "東京の天気は晴れです。明日は雨が降るでしょう。キーは秘密にしてください。",
    "task-list items: ask-me, desk-lamp, mask-on",
    "Use a bearer token for authentication.",
    "The meeting is at 10:30 on 2024-05-01 in room 12:00.",
    "scikit-learn (sk-learn) and hf_hub_download are library names",
    "ssh://git@github.com/org/repo.git and http://localhost:8000/docs",
    "Visit https://example.com:8443/path for details.",
    "SG. is short for Singapore; AKIA alone is not a key; eyJ too.",
)
"""Texts that must come out unchanged."""


# -- generators for the property tests -------------------------------------------------------

_BODY = "QXZJVWKY13579"
_PROSE = (
    "the", "model", "said", "hello", "world", "and", "time", "is", "now", "ok", "quick", "brown",
    "fox", "zebra", "answer", "こんにちは", "世界", "日本語のテキスト", "🌍", "naïve", "📦",
    "é", "—", "…", "données", "grüße",
)  # fmt: skip
_SEPARATORS = (" ", " ", " ", "\n", "\n\n", ". ", ", ", ": ", "? ", "  ", "\t")
_BEFORE = (" ", "\n", "(", '"', "キーは", ": ", "\n\n")
_AFTER = (" ", "\n", ". ", ")", '"', ", ", "\n\n")
_NEGATIVE_SAFE = (
    "123e4567-e89b-12d3-a456-426614174000",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "![img](data:image/png;base64,iVBORw0KGgoaaaansuhe+/gagabedcef2468aaaaabbbbccccddddeeee==)",
    "https://www.example.com/a/very/long/path/segments/here?page=2&sort=desc#frag",
    "東京の天気は晴れです明日は雨が降るでしょう",
)


class Planted:
    """A planted secret: ``text`` as written, ``secret`` the part never to be seen."""

    __slots__ = ("secret", "text")

    def __init__(self, text: str, secret: str) -> None:
        self.text = text
        self.secret = secret

    def __repr__(self) -> str:
        return f"Planted({self.text!r})"


def _body(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=_BODY, min_size=min_size, max_size=max_size)


def _plain(lead: str, min_size: int, max_size: int) -> st.SearchStrategy[Planted]:
    return _body(min_size, max_size).map(lambda b: Planted(lead + b, lead + b))


def _with(lead: str, body: st.SearchStrategy[str], trail: str = "") -> st.SearchStrategy[Planted]:
    return body.map(lambda b: Planted(lead + b + trail, b))


planted_secrets: st.SearchStrategy[Planted] = st.one_of(
    _plain("sk-ant-api03-", 20, 48),
    _plain("sk-proj-Q7", 18, 40),  # real OpenAI keys hold a digit and a capital letter
    _plain("sk-Q7", 18, 40),
    _plain("sk_live_", 12, 30),
    st.builds(lambda b: Planted("AKIA" + b, "AKIA" + b), _body(16, 16)),
    _plain("ghp_", 30, 40),
    _plain("glpat-", 20, 26),
    st.builds(
        lambda d, b: Planted(f"xoxb-{d}-{b}", f"xoxb-{d}-{b}"),
        st.text(alphabet="13579", min_size=6, max_size=12),
        _body(10, 30),
    ),
    st.builds(lambda b: Planted("AIza" + b, "AIza" + b), _body(35, 35)),
    _plain("hf_", 30, 36),
    st.builds(lambda a, b: Planted(f"SG.{a}.{b}", f"SG.{a}.{b}"), _body(22, 22), _body(43, 43)),
    st.builds(
        lambda d, b: Planted(f"{d}:{b}", f"{d}:{b}"),
        st.text(alphabet="13579", min_size=8, max_size=10),
        _body(35, 35),
    ),
    st.builds(
        lambda a, b, c: Planted(f"eyJ{a}.eyJ{b}.{c}", f"eyJ{a}.eyJ{b}.{c}"),
        _body(8, 30),
        _body(8, 30),
        _body(8, 30),
    ),
    _with(
        "Bearer ",
        st.builds(lambda b, pad: "7" + b + pad, _body(20, 60), st.sampled_from(["", "=", "=="])),
    ),
    _with("https://api.example.org/cb?token=", _body(8, 40)),
    st.builds(lambda p: Planted(f"postgres://admin:{p}@db.internal", f"admin:{p}"), _body(8, 20)),
    st.builds(
        lambda lines: Planted(
            "-----BEGIN RSA PRIVATE KEY-----\n"
            + "\n".join(lines)
            + "\n-----END RSA PRIVATE KEY-----",
            "\n".join(lines),  # the body (header and END line are the same in every key)
        ),
        st.lists(_body(16, 64), min_size=1, max_size=6),
    ),
)


@st.composite
def texts_with_secrets(draw: st.DrawFn, max_parts: int = 40) -> tuple[str, list[Planted]]:
    """Prose, multibyte text, negatives and planted secrets; returns (text, planted)."""
    parts: list[str] = []
    planted: list[Planted] = []
    for _ in range(draw(st.integers(1, max_parts))):
        kind = draw(st.sampled_from(("prose", "prose", "prose", "negative", "secret")))
        if kind == "secret":
            secret = draw(planted_secrets)
            planted.append(secret)
            parts += [draw(st.sampled_from(_BEFORE)), secret.text, draw(st.sampled_from(_AFTER))]
        elif kind == "negative":
            parts += [" ", draw(st.sampled_from(_NEGATIVE_SAFE)), " "]
        else:
            parts += [draw(st.sampled_from(_PROSE)), draw(st.sampled_from(_SEPARATORS))]
    return "".join(parts), planted


def windows(secret: str, size: int = 5) -> set[str]:
    """Every run of ``size`` consecutive characters of ``secret`` (the whole of a shorter one)."""
    if len(secret) <= size:
        return {secret}
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}
