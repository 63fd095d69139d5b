"""The deciding parts of operations (architecture §7), without processes: what a reload changes,
the retry backoff, the JSON log line, ``/healthz`` with providers, ``relaybot runs`` over a
store written here."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import pytest

from channels.base import ChannelHealth
from config.loader import load_config_text
from orchestrator.cli import main
from orchestrator.metrics import Metrics, health_body
from orchestrator.ops.lifecycle import RETRY_MAX_SECS, retry_delay
from orchestrator.ops.logsetup import RedactingFormatter, iso_utc
from orchestrator.ops.reload import plan_reload, read_for_reload
from orchestrator.policy import OutboundPolicy
from orchestrator.store import RoundRecord, Store
from providers.errors import ProviderServerError

SECRET = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"

BASE = """\
providers:
  main: {kind: openai_chat, base_url: "http://127.0.0.1:9/v1", api_key: k, model: MODEL}
  spare: {kind: openai_chat, base_url: "http://127.0.0.1:9/v1", api_key: k, model: s}
agent:
  providers: [main]
  system_prompt: PROMPT
channels:
  tg: {kind: telegram, token: "1:a", base_url: "http://127.0.0.1:9/bot"}
  EXTRA
server:
  listen: null
"""


def config(model: str = "m", prompt: str = "hi", extra: str = "", chain: str = "[main]") -> str:
    text = BASE.replace("MODEL", model).replace("PROMPT", prompt).replace("EXTRA", extra)
    return text.replace("providers: [main]", f"providers: {chain}")


def plan(old: str, new: str) -> str:
    return plan_reload(load_config_text(old), load_config_text(new)).summary()


def test_a_reload_restarts_what_changed_and_only_that() -> None:
    second = 'tg2: {kind: telegram, token: "2:b", base_url: "http://127.0.0.1:9/bot"}'
    assert plan(config(), config()) == "nothing changed"
    assert plan(config(), config(extra=second)) == "channels added: tg2"
    assert plan(config(extra=second), config()) == "channels removed: tg2"
    changed = second.replace("2:b", "2:c")
    assert plan(config(extra=second), config(extra=changed)) == "channels restarted: tg2"
    assert plan(config(), config(model="m2")) == "providers changed: main"
    assert plan(config(), config(chain="[main, spare]")) == "provider chain changed"
    assert plan(config(), config(prompt="other")) == "after a restart only: agent"
    moved = config().replace("listen: null", "listen: 127.0.0.1:9999")
    assert plan(config(), moved) == "after a restart only: server"


def test_a_file_that_does_not_validate_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bot.yaml"
    path.write_text(config() + "nonsense: 1\nmore: 2\n")
    why = read_for_reload(path)
    assert isinstance(why, str) and "\n" not in why
    assert "nonsense" in why and "(and 1 more problem)" in why
    path.write_text(config().replace("api_key: k", f"api_key: {SECRET}") + "x: 1\n")
    assert SECRET not in str(read_for_reload(path))
    assert "cannot read" in str(read_for_reload(tmp_path / "missing.yaml"))


def test_the_backoff_doubles_up_to_a_minute() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert retry_delay(30) == RETRY_MAX_SECS == 60.0


def test_json_log_lines_have_iso_utc_time_and_the_reply_fields() -> None:
    formatter = RedactingFormatter(OutboundPolicy.from_config().redact, "json")
    record = logging.LogRecord(
        "orchestrator.ops.daemon", logging.INFO, __file__, 1, "reply", (), None
    )
    record.created = 1796103412.45  # 2026-12-01T05:36:52.450Z
    record.fields = {"channel": "tg", "chat": "1", "round": 2, "tokens": 5, "note": SECRET}
    line = json.loads(formatter.format(record))
    assert line == {
        "time": "2026-12-01T05:36:52.450Z",
        "level": "info",
        "logger": "orchestrator.ops.daemon",
        "message": "reply",
        "channel": "tg",
        "chat": "1",
        "round": 2,
        "tokens": 5,
        "note": "[REDACTED:anthropic_key]",
    }
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"
    text = RedactingFormatter(OutboundPolicy.from_config().redact).format(record)
    assert text.endswith("reply (tokens=5 note=[REDACTED:anthropic_key])")


def test_healthz_names_providers_and_a_failing_one_degrades_it() -> None:
    metrics = Metrics()
    metrics.set_providers(["main", "spare"])
    metrics.health = lambda: {"tg": ChannelHealth()}
    assert json.loads(metrics.health_response()[1])["providers"] == {
        "main": {"state": "ok"},
        "spare": {"state": "ok"},
    }
    metrics.observe_provider_error("main", ProviderServerError("503 Service Unavailable"))
    status, body = metrics.health_response()
    assert status == 503
    assert json.loads(body)["providers"]["main"] == {
        "state": "degraded",
        "reason": "last call failed: 503 Service Unavailable",
    }
    record = RoundRecord("tg", "1", "main", 2, 120.0, 10, 5, None, 3, "stop", "ok")
    metrics.observe_round(record)
    assert metrics.health_response()[0] == 200
    assert health_body({}) == (200, b'{"status": "ok", "channels": {}}')


def test_runs_prints_the_latest_rounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "bot.db"
    store = Store(db)
    for chat, outcome in (("7", "ok"), ("8", "interrupted"), ("7", "tool_calls")):
        store.record_round(RoundRecord("tg", chat, "main", 1, 250.0, 10, 20, 0, 2, None, outcome))
    store.close()
    path = tmp_path / "bot.yaml"
    path.write_text(config().replace("server:", f'storage:\n  path: "{db}"\nserver:'))
    assert main(["runs", "--config", str(path), "--json", "--chat", "7"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["outcome"] for r in rows] == ["tool_calls", "ok"]  # newest first
    assert rows[0]["time"].endswith("Z") and rows[0]["ttft_ms"] == 250.0
    assert main(["runs", "--config", str(path), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "interrupted" in out and "tool_calls" in out and "| ok" not in out
    assert time.strftime("%Y-%m-%d", time.gmtime()) in out
    assert main(["runs", "--config", str(tmp_path / "missing.yaml")]) == 2
    empty = tmp_path / "empty.yaml"
    empty.write_text(config().replace("server:", f'storage:\n  path: "{tmp_path}/no.db"\nserver:'))
    assert main(["runs", "--config", str(empty)]) == 1
    assert "no store at" in capsys.readouterr().err
    assert sys.stdout is not None


async def test_the_demo_server_sends_reason_phrases() -> None:
    import anyio

    from orchestrator.ops.http_server import HttpRequest, HttpResponse, HttpServer
    from tests.ops_harness import get

    async def handler(request: HttpRequest) -> HttpResponse:
        return HttpResponse(503 if request.target == "/busy" else 200, b"{}")

    async with anyio.create_task_group() as tg:
        server = HttpServer(handler)
        await server.start(tg)
        assert (await get(server.port, "/"))[0] == "HTTP/1.1 200 OK"
        assert (await get(server.port, "/busy"))[0] == "HTTP/1.1 503 Service Unavailable"
        tg.cancel_scope.cancel()
