"""The outbound-policy cases through the Telegram wire (architecture §3 "Access", §4): the real
daemon against the local Bot API peer and a local Chat Completions server, in ``partial``,
``multi_message`` and ``off``. Every write the peer received — sends and edits, as Telegram
displays them (text + entities: the visible text is the ``text`` parameter) — is read as a reader
reads it (:func:`tests.policy_forms.reader_view`) and must hold no part of a secret."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path

import anyio
import pytest

from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from orchestrator.policy import OutboundPolicy
from orchestrator.policy.catalogue import BUILTIN_SHAPES, EXTRA_PATTERN_TIMEOUT_SECS, Redactor
from orchestrator.policy.shapes import SecretShape
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.telegram import TelegramBotApiServer
from tests.policy_forms import reader_view
from tests.policy_samples import windows
from tests.telegram_harness import (
    CHAT,
    PATH,
    SPACING_TOLERANCE_SECS,
    Bot,
    _config_text,
    fast_channels,
    reply,
    serving,
    text_stream,
    tool_call_stream,
)

MODES = ["partial", "multi_message", "off"]
ANT = "sk-ant-api03-QXZJVWKY13579QXZJVWKY13579QXZJ"
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nQXZJVWKY13579QXZJVWKY13579QXZJVWKY1357=="


@asynccontextmanager
async def policy_bot(
    tmp_path: Path,
    replies: Sequence[Reply],
    *,
    mode: str,
    edit: Callable[[str], str] = lambda text: text,
) -> AsyncIterator[Bot]:
    """:func:`tests.telegram_harness.running_bot` with the config text passed through ``edit``
    (extra patterns, ``allowed_users``)."""
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(CHAT)
        provider.script(PATH, list(replies))
        text = _config_text(
            peer, provider, tmp_path, mode=mode, interval_ms=120, multi_message_delay_ms=150
        )
        config = load_config_text(edit(text), source_name="e2e.yaml", environ={})
        daemon = Daemon(
            config, storage_path=tmp_path / "relaybot.db", channel_factory=fast_channels
        )
        async with serving(daemon, peer):
            yield Bot(peer, provider, daemon, 120, mode, 150)


def shown(bot: Bot) -> list[str]:
    """Every text a write asked the chat to show (sends and edits), refused ones included."""
    return [str(c.params.get("text", "")) for c in bot.writes()]


def assert_hidden(bot: Bot, *secrets: str) -> None:
    for text in shown(bot):
        view = reader_view(text)
        for secret in secrets:
            leaked = [w for w in windows(reader_view(secret)) if w in view or w in text]
            assert not leaked, (secret, leaked[:3], text)


def final(bot: Bot) -> str:
    return "\n".join(bot.peer.texts(CHAT))


def pieces(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("mode", MODES)
async def test_a_round_opening_with_a_key_after_narration_ending_in_a_letter(
    tmp_path: Path, mode: str
) -> None:
    first = reply(tool_call_stream(pieces("Looking it up now")))
    second = reply(text_stream(pieces("AKIAIOSFODNN7EXAMPLE is the id. All done here.")))
    async with policy_bot(tmp_path, [first, second], mode=mode) as bot:
        await bot.ask("which id?")
        bot.check()
    assert_hidden(bot, "AKIAIOSFODNN7EXAMPLE")
    assert "[REDACTED:aws_access_key] is the id." in final(bot)


FORMS_ANSWER = (
    f"Italic: _{ANT}_ and escaped: sk\\_live\\_51HqQXZJVWKY13579abcd.\n\n"
    f'Entities: sk&#45;ant&#45;{ANT[7:]} and JSON: {{"k": "a\\nsk\\u002dant\\u002dapi03-'
    'QXZJVWKY13579QXZJVWKY13579"}.\n\n'
    f"Percent: %22{ANT}%22 and a fragment: https://a.example/cb#access_token=QXZJ7VWKY9Z3&s=1\n\n"
    f"Hidden: {ANT[:20]}\u200b{ANT[20:]} and {ANT[:22]}\u00ad{ANT[22:]}; wide: "
    + "".join(chr(ord(c) + 0xFEE0) for c in "sk-ant-")
    + f"{ANT[7:]}; linked: sk-ant-api03-[QXZJVWKY1357](https://example.com)9QXZJVWKY13579.\n\n"
    "URL: postgres://admin:p@ss/QXZJ7VWKY@db.internal:5432/app\n\n"
    f"Quoted:\n> -----BEGIN RSA PRIVATE KEY-----\n> {PEM_BODY.replace(chr(10), chr(10) + '> ')}\n"
    "> -----END RSA PRIVATE KEY-----\n\n"
    'GCP: {"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7QXZJVWKY13579\\n"
    '-----END PRIVATE KEY-----\\n"}\n\n'
    "PGP:\n-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
    "lQOYBF0QXZJVWKY13579abcdEFGHijklMNOPqrstUVWXyz0123456789+/\n=QXZJ\n"
    "-----END PGP PRIVATE KEY BLOCK-----\n\n"
    f"Footnote: {ANT[:20]}[^1]{ANT[20:]}; image: {ANT[:18]}![k](https://example.com/k.png)"
    f"{ANT[18:]}; tags: {ANT[:16]}<b></b>{ANT[16:]}; bare reference: sk&#45ant-{ANT[7:]}.\n\n"
    "That is all."
)


@pytest.mark.parametrize("mode", MODES)
async def test_secrets_in_rendered_and_escaped_forms_are_never_shown(
    tmp_path: Path, mode: str
) -> None:
    async with policy_bot(
        tmp_path, [reply(text_stream(pieces(FORMS_ANSWER, 4)))], mode=mode
    ) as bot:
        await bot.ask("show me")
        bot.check()
    assert_hidden(
        bot, "QXZJVWKY13579QXZJ", "51HqQXZJVWKY", "QXZJ7VWKY9Z3", "p@ss/QXZJ7VWKY", "MIIEpAIB"
    )
    assert_hidden(bot, "MIIEvQIBADAN", "lQOYBF0QXZJ", "sk-ant-api0", ANT)
    assert "That is all." in final(bot)


PROSE = (
    "Use bearer tokens for service calls; the sk-learn-compatible API is fine; "
    "xoxo-hugs-and-kisses from the team; see you at ASIAPACIFIC2024SUMMIT. A key file starts "
    "with -----BEGIN RSA PRIVATE KEY----- and must stay private.\n\nThe rest of the answer "
    "continues after that header, whole."
)


@pytest.mark.parametrize("mode", MODES)
async def test_lookalikes_in_prose_reach_the_chat_unchanged(tmp_path: Path, mode: str) -> None:
    async with policy_bot(tmp_path, [reply(text_stream(pieces(PROSE, 6)))], mode=mode) as bot:
        await bot.ask("explain")
        bot.check()
    text = final(bot)
    assert "REDACTED" not in text
    for phrase in ("bearer tokens", "sk-learn-compatible", "xoxo-hugs-and-kisses"):
        assert phrase in text
    assert "ASIAPACIFIC2024SUMMIT" in text and "continues after that header, whole." in text


def _extra(keyword: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        pattern = (
            "policy:\n  extra_secret_patterns:\n"
            f'    - {{name: nokw, regex: "zz[0-9]{{8}}", keywords: [{keyword}]}}\n'
        )
        return pattern + text

    return edit


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("keyword", ["yy", "ZZ"])
async def test_an_extra_pattern_matches_whatever_its_keywords(
    tmp_path: Path, mode: str, keyword: str
) -> None:
    answer = reply(text_stream(pieces("Your code is zz12345678, keep it safe.", 3)))
    async with policy_bot(tmp_path, [answer], mode=mode, edit=_extra(keyword)) as bot:
        await bot.ask("code?")
        bot.check()
    assert_hidden(bot, "zz12345678")
    assert "Your code is [REDACTED:nokw], keep it safe." in final(bot)


def _approval(text: str) -> str:
    return text.replace(
        "  tools: [current_time]\n",
        "  tools: [current_time]\n  require_approval: [current_time]\n  approval_timeout_secs: 1\n",
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "argument",
    [
        pytest.param(f'{{"k": "{ANT[:22]}\u00ad{ANT[22:]}"}}', id="nested-json-soft-hyphen"),
        pytest.param(f"{ANT[:9]}**{ANT[9:30]}**{ANT[30:]}", id="emphasis-inside"),
        pytest.param(f"sk&#45ant-{ANT[7:]}", id="bare-character-reference"),
        pytest.param(f"{ANT[:20]}[^1]{ANT[20:]}", id="footnote-inside"),
    ],
)
async def test_an_approval_prompt_shows_no_key_in_any_form_of_the_arguments(
    tmp_path: Path, mode: str, argument: str
) -> None:
    """The prompt quotes the tool's JSON arguments (``json.dumps``: a soft hyphen is written
    ``\\u00ad``, a nested JSON value escaped again); nobody answers it, so the call is denied
    after ``approval_timeout_secs`` and the model answers."""
    first = reply(tool_call_stream(["One moment."], timezone=argument))
    second = reply(text_stream(["It was not run."]))
    async with policy_bot(tmp_path, [first, second], mode=mode, edit=_approval) as bot:
        await bot.ask("time?", within=30)
    assert any("current_time" in text for text in shown(bot)), "the prompt was shown"
    # The prompt, its outcome edit and the reply's writes keep the chat's spacing.
    bot.check()
    assert_hidden(bot, ANT)
    assert "It was not run." in final(bot)


# -- access ---------------------------------------------------------------------------------


def _only_alice(text: str) -> str:
    return text.replace('allowed_users: ["*"]', 'allowed_users: ["alice"]')


async def test_a_display_name_like_a_handle_is_never_allowed(tmp_path: Path) -> None:
    """A user without a username whose display name is ``@alice`` is not the user alice: no
    answer in a private chat, and ``/reset@bot`` in a group resets nothing."""
    group = -500
    answers = [reply(text_stream(["Hello ", "group."]))]
    async with policy_bot(tmp_path, answers, mode="partial", edit=_only_alice) as bot:
        # The real alice (username verified by Telegram) is answered in the group.
        bot.peer.inject_message(group, "@relay_test_bot hi")
        with anyio.fail_after(20):
            await bot.channel.wait_replies(1)
        assert "Hello group." in bot.peer.texts(group)
        before = len(bot.peer.calls)
        impostor = {"user_id": 222, "username": None, "first_name": "@alice"}
        bot.peer.inject_message(CHAT + 1, "hi", **impostor)  # type: ignore[arg-type]
        bot.peer.inject_message(group, "/reset@relay_test_bot", **impostor)  # type: ignore[arg-type]
        bot.peer.inject_message(group, "@relay_test_bot hi", **impostor)  # type: ignore[arg-type]
        await anyio.sleep(1.5)
        writes = [
            c
            for c in bot.peer.calls[before:]
            if c.method.lower() in {"sendmessage", "editmessagetext", "deletemessage"}
        ]
        # No answer; only the one notice telling the impostor their own id (architecture §3
        # "Access"), in the private chat where they first addressed the bot.
        assert [(c.method.lower(), c.chat_id) for c in writes] == [("sendmessage", CHAT + 1)]
        assert "Your user id is 222" in bot.peer.texts(CHAT + 1)[0]
        assert bot.daemon.store.history("tg", str(group)), "the group's conversation was kept"


# -- a secret pattern that times out ---------------------------------------------------------

OTHER_CHAT = 222


async def test_a_pattern_timing_out_in_one_chat_never_delays_the_other_chats_edits(
    tmp_path: Path,
) -> None:
    """An extra pattern that slipped past the load-time check (``(a|aa)+b``, built here without
    it) times out on every look at chat A's answer; chat B streams meanwhile. No gap between
    two of B's writes exceeds twice the interval (its spacing, plus at most one interval of
    delay), and A's answer is masked where the pattern could not finish."""
    slow = SecretShape("slow", "(a|aa)+b", timeout_secs=EXTRA_PATTERN_TIMEOUT_SECS)
    policy = OutboundPolicy(Redactor((*BUILTIN_SHAPES, slow)))
    run_of_a = "a" * 40 + "c "
    replies = [
        reply(text_stream(pieces(run_of_a * 40, 6)), delay_secs=0.02),
        reply(text_stream(pieces("bee " * 500, 10)), delay_secs=0.02),
    ]
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(CHAT)
        peer.open_chat(OTHER_CHAT)
        provider.script(PATH, replies)
        text = _config_text(
            peer, provider, tmp_path, mode="partial", interval_ms=120, multi_message_delay_ms=150
        )
        config = load_config_text(text, source_name="e2e.yaml", environ={})
        daemon = Daemon(
            config,
            storage_path=tmp_path / "relaybot.db",
            channel_factory=fast_channels,
            policy=policy,
        )
        async with serving(daemon, peer):
            channel = daemon.channels["tg"]
            peer.inject_message(CHAT, "first")
            await peer.wait_for(lambda: len(provider.requests) == 1, 10)
            peer.inject_message(OTHER_CHAT, "second", user_id=222, username="bob")
            with anyio.fail_after(60):
                await channel.wait_replies(2)  # type: ignore[attr-defined]
    writes_b = [
        c.at
        for c in peer.calls
        if c.chat_id == OTHER_CHAT and c.method in ("sendMessage", "editMessageText")
    ]
    writes_a = [c.at for c in peer.calls if c.chat_id == CHAT and c.method != "sendChatAction"]
    during = [t for t in writes_b if t <= max(writes_a)]
    assert len(during) >= 3, "chat B streamed while chat A was redacted"
    gaps = [b - a for a, b in pairwise(writes_b)]
    assert max(gaps) < 2 * 0.120 + SPACING_TOLERANCE_SECS, gaps
    assert "[REDACTED:slow]" in "\n".join(peer.texts(CHAT))
    assert "bee bee" in "\n".join(peer.texts(OTHER_CHAT))


# -- redaction removes the secret, not the answer (issue: URL passwords ate the whole answer) ---

URL_FORMS = (
    "postgres://admin:QXZhunter2@db.internal:5432/app",
    "https://deploy:QXZhunter2@git.example.org/repo.git",
    "redis://:QXZhunter2@cache:6379/0",
    "mongodb+srv://app:QXZ%40hunter2@cluster0.mongodb.net/db",
)


def url_answer(url: str, position: str) -> str:
    return {
        "first": f"{url}\nConnect with the URL above.\nKEEPWORD stays.",
        "middle": f"Connect with this URL:\n{url}\nKEEPWORD stays.",
        "last": f"Connect with this URL.\nKEEPWORD stays.\n{url}",
        "inline": f"Connect with this URL: {url} and KEEPWORD stays.",
    }[position]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("position", ["first", "middle", "last", "inline"])
@pytest.mark.parametrize("url", URL_FORMS)
async def test_a_url_password_is_masked_and_every_other_line_stays(
    tmp_path: Path, mode: str, position: str, url: str
) -> None:
    answer = url_answer(url, position)
    async with policy_bot(tmp_path, [reply(text_stream(pieces(answer, 7)))], mode=mode) as bot:
        await bot.ask("how do I connect?")
        bot.check()
    assert_hidden(bot, "QXZhunter2", "QXZ%40hunter2")
    expected = Redactor().redact(answer)
    assert "[REDACTED:url_password]@" in expected
    assert final(bot) == expected, "the chat shows the redacted answer, every line of it"


_KEY = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"
READER_FORMS_ANSWER = (
    f"Wrapped:\n{_KEY[:30]}\n{_KEY[30:]}\n\n"
    f'Pieces: key = "{_KEY[:16]}" "{_KEY[16:]}"\n\n'
    "PEM:\n-----BEGIN\u00a0RSA\u00a0PRIVATE\u00a0KEY-----\n"
    "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nQXZJVWKY13579QXZJVWKY1357==\n"
    "-----END\u00a0RSA\u00a0PRIVATE\u00a0KEY-----\n\n"
    "Look-alike: \u0455k-ant-api03-QXZJVWKY13579QXZJVWKY13579 ok\n\n"
    "Glued: id1sk-ant-api03-JJJJQXZJVWKY13579KKKK ok\n\n"
    "That is all."
)


@pytest.mark.parametrize("mode", MODES)
async def test_wrapped_pieced_spaced_lookalike_and_glued_keys_never_show(
    tmp_path: Path, mode: str
) -> None:
    async with policy_bot(
        tmp_path, [reply(text_stream(pieces(READER_FORMS_ANSWER, 5)))], mode=mode
    ) as bot:
        await bot.ask("show me")
        bot.check()
    assert_hidden(
        bot, "AAAABBBBCCCCDDDD", "EEEEFFFFGGGGHHHHIIIIJJJJ", "MIIEpAIBAAKCAQEA3Tz2mr7",
        "QXZJVWKY13579QXZJVWKY13579", "JJJJQXZJVWKY13579KKKK",
    )  # fmt: skip
    text = final(bot)
    assert text.count("[REDACTED:anthropic_key]") == 4 and "[REDACTED:private_key]" in text
    assert "That is all." in text
