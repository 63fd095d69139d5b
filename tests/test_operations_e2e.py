"""``relaybot run`` as an operator runs it (architecture §7): a process against the Telegram wire
server (tests/peers/telegram.py) and a slow Chat Completions server, stopped with SIGTERM while
it answers, reloaded with SIGHUP, scraped on ``/healthz`` and ``/metrics``, its rounds read back
with ``relaybot runs``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.ops_harness import BotProcess, get, relaybot
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.telegram import TelegramBotApiServer
from tests.pipeline import sse, text_answer
from tests.telegram_chats import free_port

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals")

CHAT = 111
PATH = "/v1/chat/completions"
SECRET = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def slow_answer(count: int, *, delay: float = 0.1) -> Reply:
    """``w0 w1 … w{count-1}``, one word every ``delay`` seconds, finish ``stop``."""
    words: list[Any] = [
        {"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]} for i in range(count)
    ]
    words.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return Reply(body=sse(*words, "[DONE]"), delay_secs=delay, cuts=range(0, 40 * count, 40))


def slow_text(count: int) -> str:
    return " ".join(f"w{i}" for i in range(count))


def telegram_channel(name: str, peer_url: str, token: str) -> str:
    return f"""\
  {name}:
    kind: telegram
    token: "{token}"
    base_url: "{peer_url}/bot"
    stream_mode: "off"
    allowed_users: ["*"]
"""


def config_text(
    provider: ProviderServer,
    channels: str,
    *,
    model: str = "m1",
    listen: str = "null",
) -> str:
    return f"""\
providers:
  main:
    kind: openai_chat
    base_url: "{provider.url}/v1"
    api_key: local-test-key
    model: {model}
agent:
  providers: [main]
  tools: []
channels:
{channels}storage:
  path: state/bot.db
server:
  listen: {listen}
"""


def models_asked(provider: ProviderServer) -> list[str]:
    return [str(r.json["model"]) for r in provider.requests_to(PATH)]


async def test_sigterm_mid_answer_with_stdin_http_and_a_long_poll_open(tmp_path: Path) -> None:
    """Console stdin open, the HTTP server up, getUpdates long-polling: SIGTERM while an answer
    streams lets it finish and ends the process with 0 (not when stdin closes). Before that,
    ``/metrics`` parses with prometheus-client's parser and has every family; the JSON log has
    one line per finished reply with its fields; ``relaybot runs`` shows both rounds."""
    port = free_port()
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(CHAT)
        provider.script(PATH, [Reply(body=text_answer(f"First: {SECRET} done.")), slow_answer(30)])
        channels = "  term:\n    kind: console\n" + telegram_channel("tg", peer.url, peer.token)
        config = tmp_path / "bot.yaml"
        config.write_text(config_text(provider, channels, listen=f"127.0.0.1:{port}"))
        async with BotProcess(tmp_path, config, "--log-format", "json") as bot:
            await bot.wait_logged("relaybot running")
            await peer.wait_for(lambda: bool(peer.calls_to("getUpdates")), 30)
            peer.inject_message(CHAT, "first question")
            await peer.wait_for(lambda: len(peer.texts(CHAT)) == 1, 30)
            await bot.wait_logged("reply in tg:")

            status, headers, body = await get(port, "/metrics")
            assert status == "HTTP/1.1 200 OK"
            assert headers["content-type"].startswith("text/plain; version=")
            families = {f.name: f for f in text_string_to_metric_families(body.decode())}
            assert set(families) >= {
                "relaybot_replies",
                "relaybot_rounds",
                "relaybot_ttft_seconds",
                "relaybot_reply_duration_seconds",
                "relaybot_tokens",
                "relaybot_writes",
                "relaybot_rate_limit_waits",
                "relaybot_rate_limit_wait_seconds",
                "relaybot_redactions",
                "relaybot_active_turns",
                "relaybot_queued_messages",
                "relaybot_provider_errors",
                "relaybot_fallbacks",
            }

            def value(family: str, sample: str, **labels: str) -> float:
                return sum(
                    s.value
                    for s in families[family].samples
                    if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
                )

            assert value("relaybot_replies", "relaybot_replies_total", outcome="ok") == 1
            # the start-up heap is frozen (architecture §7 "Process"): modules, classes, config
            frozen = value("relaybot_gc_frozen_objects", "relaybot_gc_frozen_objects")
            assert frozen > 50_000, frozen
            assert value("relaybot_rounds", "relaybot_rounds_total", provider="main") == 1
            assert value("relaybot_writes", "relaybot_writes_total", channel="tg", kind="send") >= 1
            assert value("relaybot_redactions", "relaybot_redactions_total", shape="anthropic_key")
            assert value("relaybot_ttft_seconds", "relaybot_ttft_seconds_count") == 1
            assert value("relaybot_active_turns", "relaybot_active_turns") == 0
            health_status, _, health = await get(port, "/healthz")
            assert health_status == "HTTP/1.1 200 OK"
            assert json.loads(health) == {
                "status": "ok",
                "channels": {"term": {"state": "ok"}, "tg": {"state": "ok"}},
                "providers": {"main": {"state": "ok"}},
            }
            assert (await get(port, "/nothing"))[0] == "HTTP/1.1 404 Not Found"

            peer.inject_message(CHAT, "second question")
            await bot.wait_for(lambda: len(provider.requests_to(PATH)) == 2)
            await asyncio.sleep(1.0)  # the answer is streaming (3 s in all)
            assert len(peer.texts(CHAT)) == 1
            stopped_at = time.monotonic()
            bot.signal(signal.SIGTERM)
            code = await bot.finish(within=45)
            took = time.monotonic() - stopped_at
        assert code == 0, bot.err
        assert took < 30, "ended within the grace, with stdin still open"
        assert peer.texts(CHAT) == ["First: [REDACTED:anthropic_key] done.", slow_text(30)]

    lines = bot.json_lines()
    assert all(ISO_UTC.match(line["time"]) for line in lines)
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert SECRET not in bot.err
    replies = [line for line in lines if line["message"].startswith("reply in tg:")]
    assert len(replies) == 2
    first = replies[0]
    assert first["level"] == "info" and first["logger"] == "orchestrator.ops.daemon"
    assert (first["channel"], first["chat"], first["round"]) == ("tg", str(CHAT), 1)
    assert (first["provider"], first["outcome"]) == ("main", "ok")
    assert isinstance(first["ttft_ms"], int) and isinstance(first["tokens"], int)

    code, out, err = await relaybot(tmp_path, "runs", "--config", str(config))
    assert code == 0, err
    header = next(line for line in out.splitlines() if "channel" in line)
    for column in ("time (UTC)", "channel", "chat", "provider", "attempts", "TTFT ms", "tokens"):
        assert column in header
    assert "writes" in header and "outcome" in header
    rows = [line for line in out.splitlines() if " tg " in line]
    assert len(rows) == 2 and all(str(CHAT) in row and "main" in row for row in rows)
    code, out, _ = await relaybot(tmp_path, "runs", "--config", str(config), "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["outcome"] for r in records] == ["ok", "ok"]
    assert all(ISO_UTC.match(r["time"]) and r["chat"] == str(CHAT) for r in records)
    assert records[0]["ttft_ms"] is not None and isinstance(records[0]["writes"], int)
    runs = ("runs", "--config", str(config))
    code, out, _ = await relaybot(tmp_path, *runs, "--json", "--limit", "1")
    assert len(out.splitlines()) == 1
    code, out, _ = await relaybot(tmp_path, *runs, "--chat", "999")
    assert " tg " not in out


async def test_sighup_adds_a_channel_and_changes_the_model(tmp_path: Path) -> None:
    """SIGHUP while an answer streams: the file now has a second Telegram channel and another
    model. The running answer completes; the new channel answers, with the new model. A file
    that does not validate afterwards is one log line, and the bot keeps serving."""
    async with (
        TelegramBotApiServer() as first_peer,
        TelegramBotApiServer() as second_peer,
        ProviderServer() as provider,
    ):
        first_peer.open_chat(CHAT)
        second_peer.open_chat(CHAT)
        provider.script(PATH, [slow_answer(30), Reply(body=text_answer("From the new channel."))])
        one = telegram_channel("tg", first_peer.url, first_peer.token)
        two = one + telegram_channel("tg2", second_peer.url, second_peer.token)
        config = tmp_path / "bot.yaml"
        config.write_text(config_text(provider, one, model="m1"))
        async with BotProcess(tmp_path, config) as bot:
            await bot.wait_logged("relaybot running")
            await first_peer.wait_for(lambda: bool(first_peer.calls_to("getUpdates")), 30)
            first_peer.inject_message(CHAT, "a long one")
            await bot.wait_for(lambda: len(provider.requests_to(PATH)) == 1)
            await asyncio.sleep(0.5)

            config.write_text(config_text(provider, two, model="m2"))
            bot.signal(signal.SIGHUP)
            await bot.wait_logged("reload: channels added: tg2; providers changed: main")
            await second_peer.wait_for(lambda: bool(second_peer.calls_to("getUpdates")), 30)
            second_peer.inject_message(CHAT, "hello there")
            await second_peer.wait_for(lambda: len(second_peer.texts(CHAT)) == 1, 30)
            await first_peer.wait_for(lambda: len(first_peer.texts(CHAT)) == 1, 30)

            config.write_text(config_text(provider, two, model="m2") + "unknown_section: 1\n")
            bot.signal(signal.SIGHUP)
            await bot.wait_logged("reload: keeping the running config:")
            bot.signal(signal.SIGTERM)
            code = await bot.finish()
    assert code == 0, bot.err
    assert first_peer.texts(CHAT) == [slow_text(30)]  # the running answer completed
    assert second_peer.texts(CHAT) == ["From the new channel."]
    assert models_asked(provider) == ["m1", "m2"]
    rejected = [line for line in bot.err_lines if "reload: keeping the running config" in line]
    assert len(rejected) == 1 and "unknown_section" in rejected[0]
    assert "Traceback" not in bot.err


async def test_a_channel_refused_at_start_becomes_healthy_when_its_server_comes_up(
    tmp_path: Path,
) -> None:
    """Three channels: one serves; one's server refuses connections at start (retried with
    backoff, ``degraded`` on ``/healthz``, healthy once the server is up); one's token is
    rejected (a permanent cause: one line, never retried). The bot serves throughout."""
    port = free_port()
    late_port = free_port()
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(CHAT)
        provider.script(PATH, Reply(body=text_answer("Still here.")))
        channels = (
            telegram_channel("tg", peer.url, peer.token)
            + telegram_channel("late", f"http://127.0.0.1:{late_port}", peer.token)
            + telegram_channel("wrong", peer.url, "999:not-the-token")
        )
        config = tmp_path / "bot.yaml"
        config.write_text(config_text(provider, channels, listen=f"127.0.0.1:{port}"))
        async with BotProcess(tmp_path, config) as bot:
            await bot.wait_logged("relaybot running")
            status, _, body = await get(port, "/healthz")
            assert status == "HTTP/1.1 503 Service Unavailable"
            health = json.loads(body)
            assert health["status"] == "degraded"
            assert health["channels"]["tg"] == {"state": "ok"}
            assert health["channels"]["late"]["state"] == "degraded"
            assert "cannot reach the Bot API server" in health["channels"]["late"]["reason"]
            assert health["channels"]["wrong"]["state"] == "degraded"
            assert "invalid token" in health["channels"]["wrong"]["reason"]
            peer.inject_message(CHAT, "are you there?")
            await peer.wait_for(lambda: peer.texts(CHAT) == ["Still here."], 30)

            async with TelegramBotApiServer(port=late_port) as late_peer:
                late_peer.open_chat(CHAT)

                async def late_is_ok() -> bool:
                    _, _, now = await get(port, "/healthz")
                    return bool(json.loads(now)["channels"]["late"] == {"state": "ok"})

                async with asyncio.timeout(60):  # the backoff may be at 16 s by now
                    while not await late_is_ok():  # noqa: ASYNC110 - polled over HTTP
                        await asyncio.sleep(0.2)
                late_peer.inject_message(CHAT, "and you?")
                await late_peer.wait_for(lambda: late_peer.texts(CHAT) == ["Still here."], 30)
                bot.signal(signal.SIGTERM)
                code = await bot.finish()
    assert code == 0, bot.err
    wrong = [line for line in bot.err_lines if "channel wrong: cannot start" in line]
    assert len(wrong) == 1 and "invalid token" in wrong[0]
    assert "999:not-the-token" not in bot.err
    retried = [line for line in bot.err_lines if "channel late: cannot start" in line]
    assert retried and all("retrying in" in line for line in retried)
