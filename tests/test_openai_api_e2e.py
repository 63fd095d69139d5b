"""The OpenAI-compatible API end to end (``kind: openai_api``, architecture §3): the official
``openai`` SDK as the client, the real daemon, and the provider wire server answering with a
tool call and then an answer holding a secret, all on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import openai
import pytest

from channels.web.access import token_identity
from orchestrator.cli import main
from tests.channel_harness import daemon_config
from tests.peers.provider_server import ProviderServer
from tests.web_harness import (
    ANSWER_HEAD,
    ANSWER_TAIL,
    NARRATION,
    SECRET,
    TOKEN,
    answer_reply,
    http_daemon,
    tool_call_reply,
)

PATH = "/v1/chat/completions"
CHANNELS = """\
  api:
    kind: openai_api
    tokens: ["${API_TOKEN}"]
"""
QUESTION = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "What time is it, and what is my key?"},
]


def client(port: int, token: str = TOKEN) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=token, max_retries=0)


def check_answer(content: str) -> None:
    """The model's answer, its secret masked, without the tool's status line."""
    assert SECRET not in content
    assert SECRET[:12] not in content
    assert content.startswith(NARRATION)
    assert ANSWER_HEAD.strip() in content and ANSWER_TAIL.strip() in content
    assert "⏳" not in content and "✓" not in content


async def test_streamed_answer_masks_the_secret_and_runs_the_tool(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [tool_call_reply(), answer_reply(repeat=4)])
        async with http_daemon(provider.url, tmp_path, CHANNELS) as port:
            stream = await client(port).chat.completions.create(
                model="m",
                messages=QUESTION,  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(deltas) >= 3, deltas  # it streamed: several deltas, not one blob
    for chunk in chunks:
        assert SECRET[:12] not in chunk.model_dump_json()
    content = "".join(deltas)
    check_answer(content)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert not chunks[-1].choices and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (31, 29)
    # The conversation is the request's: the provider got its messages; the tool ran here.
    first, second = provider.requests_to(PATH)
    sent = [(m["role"], m["content"]) for m in first.json["messages"]]
    assert [pair for pair in sent if pair[0] != "system"] == [
        (m["role"], m["content"]) for m in QUESTION if m["role"] != "system"
    ]
    assert ("system", "Answer briefly.") in sent
    tool_results = [m for m in second.json["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 1 and tool_results[0]["tool_call_id"] == "call_1"


async def test_blocking_answer_equals_the_streamed_one_and_the_stream_ends_in_done(
    tmp_path: Path,
) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [tool_call_reply(), answer_reply()] * 2)
        async with http_daemon(provider.url, tmp_path, CHANNELS) as port:
            answer = await client(port).chat.completions.create(
                model="m",
                messages=QUESTION,  # type: ignore[arg-type]
            )
            async with httpx.AsyncClient(timeout=30) as raw:
                body = await raw.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    json={"model": "m", "messages": QUESTION, "stream": True},
                )
    blocking = answer.choices[0].message.content or ""
    check_answer(blocking)
    assert answer.choices[0].finish_reason == "stop"
    assert body.headers["content-type"].startswith("text/event-stream")
    assert body.text.endswith("data: [DONE]\n\n")
    events = [line[6:] for line in body.text.split("\n") if line.startswith("data: ")]
    streamed = "".join(
        (json.loads(e)["choices"][0]["delta"].get("content") or "")
        for e in events[:-1]
        if json.loads(e)["choices"]
    )
    assert streamed == blocking


async def test_a_bad_token_gets_401_in_the_openai_error_shape(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply()])
        async with http_daemon(provider.url, tmp_path, CHANNELS) as port:
            with pytest.raises(openai.AuthenticationError) as refused:
                await client(port, "wrong-token-0123456789").chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
            models = await client(port).models.list()
            async with httpx.AsyncClient() as raw:
                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                auth = {"Authorization": f"Bearer {TOKEN}"}
                not_json = await raw.post(url, headers=auth, content=b"{nope")
                no_user = await raw.post(url, headers=auth, json={"messages": []})
    assert refused.value.status_code == 401
    body = refused.value.body
    assert isinstance(body, dict) and body["code"] == "invalid_api_key"
    assert set(body) == {"message", "type", "param", "code"}
    assert provider.requests_to(PATH) == []  # refused before any model work
    assert [m.id for m in models.data] == ["m"]
    assert (
        not_json.status_code == 400 and not_json.json()["error"]["type"] == "invalid_request_error"
    )
    assert no_user.status_code == 400 and no_user.json()["error"]["param"] == "messages"


async def test_a_client_that_goes_away_stops_the_answer(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply(repeat=40, words_delay_secs=0.05)])
        async with http_daemon(provider.url, tmp_path, CHANNELS) as port:
            stream = await client(port).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "A long story"}], stream=True
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    break  # the first text arrived: hang up
            await stream.close()
            (request,) = provider.requests_to(PATH)
            with anyio.fail_after(10):
                await request.wait_ended()
    assert request.client_closed  # the provider stream was closed, not read to its end


ALIASES = """\
  models:
    fast: {provider: main, model: m-fast}
    smart: {provider: main}
"""


async def test_the_models_are_the_aliases_and_a_request_picks_its_own(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply()])
        async with http_daemon(provider.url, tmp_path, CHANNELS, agent=ALIASES) as port:
            models = await client(port).models.list()
            answer = await client(port).chat.completions.create(
                model="fast", messages=[{"role": "user", "content": "hi"}]
            )
            with pytest.raises(openai.NotFoundError) as unknown:
                await client(port).chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
    assert [m.id for m in models.data] == ["fast", "smart"]
    assert answer.model == "fast"
    (request,) = provider.requests_to(PATH)  # the unknown model asked nothing
    assert request.json["model"] == "m-fast"
    body = unknown.value.body
    assert isinstance(body, dict) and body["code"] == "model_not_found"
    assert body["param"] == "model" and "fast, smart" in body["message"]


DAILY_CAP = "limits:\n  user: {tokens_per_day: 50}\n"
RATE_CAP = "limits:\n  user: {messages_per_minute: 1}\n"
HI = [{"role": "user", "content": "hi"}]


async def test_a_token_over_its_daily_budget_gets_429_and_its_usage_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply()] * 2)
        async with http_daemon(provider.url, tmp_path, CHANNELS, policy=DAILY_CAP) as port:
            first = await client(port).chat.completions.create(model="m", messages=HI)
            with pytest.raises(openai.RateLimitError) as refused:
                await client(port).chat.completions.create(model="m", messages=HI, stream=True)
        config = tmp_path / "relaybot.yaml"
        config.write_text(
            daemon_config(provider.url, tmp_path, CHANNELS, policy=DAILY_CAP, listen="127.0.0.1:1")
        )
    assert first.usage is not None and first.usage.total_tokens == 60  # over the cap of 50
    assert len(provider.requests_to(PATH)) == 1  # the refused request asked no model
    assert refused.value.status_code == 429
    body = refused.value.body
    assert isinstance(body, dict) and body["code"] == "rate_limit_exceeded"
    assert body["message"].startswith("⛔ Your daily token limit (50) is used up")
    assert 0 < int(refused.value.response.headers["Retry-After"]) <= 86_400
    monkeypatch.setenv("API_TOKEN", TOKEN)
    capsys.readouterr()
    argv = ["usage", "--config", str(config), "--by", "user", "--json"]
    assert await anyio.to_thread.run_sync(main, argv) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["key"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        (token_identity(TOKEN), 31, 29)
    ]


async def test_a_token_over_its_message_rate_gets_429_with_retry_after(tmp_path: Path) -> None:
    async with ProviderServer() as provider:
        provider.script(PATH, [answer_reply()] * 2)
        async with http_daemon(provider.url, tmp_path, CHANNELS, policy=RATE_CAP) as port:
            await client(port).chat.completions.create(model="m", messages=HI)
            async with httpx.AsyncClient(timeout=30) as raw:
                refused = await raw.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    json={"model": "m", "messages": HI},
                )
    assert len(provider.requests_to(PATH)) == 1
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert "more than 1 message a minute" in refused.json()["error"]["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
