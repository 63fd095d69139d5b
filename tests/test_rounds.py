"""The provider failure rules of architecture §2, through real HTTP to local providers.

Each test scripts a local OpenAI-compatible server and runs one round through
:class:`RoundRunner`; backoff sleeps are recorded instead of waited, except where the test is
about a real ``Retry-After`` wait.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from config.models import ProviderConfig
from orchestrator.turn.rounds import ChainEntry, RoundFailed, RoundRunner
from providers.base import ChatMessage, ChatRequest, ToolSpec
from providers.events import Final, StreamEvent, TextDelta
from providers.openai_chat import OpenAIChatProvider
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import closed_after_test, completion

pytestmark = pytest.mark.usefixtures("closes_providers")

PATH = "/v1/chat/completions"
REQUEST = ChatRequest((ChatMessage("user", "hi"),))


def sse(*payloads: Any) -> bytes:
    out = b""
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out += b"data: " + data.encode() + b"\n\n"
    return out


def text_chunk(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def answer_stream(text: str) -> bytes:
    return sse(
        text_chunk(text),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
        "[DONE]",
    )


class Sink:
    def __init__(self) -> None:
        self.events: list[StreamEvent | str] = []

    def event(self, event: StreamEvent) -> None:
        self.events.append(event)

    def restart(self) -> None:
        self.events.append("restart")

    def text(self) -> str:
        """Text of the attempt that served the round (after the last restart)."""
        tail = (
            self.events[len(self.events) - self.events[::-1].index("restart") :]
            if "restart" in self.events
            else self.events
        )
        return "".join(e.chunk.delta for e in tail if isinstance(e, TextDelta))


def entry(server: ProviderServer, name: str, prefix: str = "/v1", **overrides: Any) -> ChainEntry:
    config = ProviderConfig(
        kind="openai_chat",
        base_url=server.url + prefix,
        api_key="sk-test",
        model="m",
        **overrides,
    )
    return closed_after_test(ChainEntry(OpenAIChatProvider(name, config), config))


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


async def test_failure_before_text_goes_blocking_on_the_same_provider() -> None:
    async with ProviderServer() as server:
        server.script(
            PATH, [Reply.json({"error": {"message": "boom"}}, status=500), completion("ok")]
        )
        sleeps = Sleeps()
        result = await RoundRunner([entry(server, "a")], sleep=sleeps).run(REQUEST, sink := Sink())
    assert result.response.text == "ok"
    assert result.attempts == 2
    assert result.ttft_ms is None  # a blocking round has no TTFT
    assert sleeps.calls == [0.5]
    assert [r.json["stream"] for r in server.requests] == [True, False]
    assert sink.events[0] == "restart" and sink.text() == "ok"


async def test_error_event_after_200_before_text_is_retried_blocking() -> None:
    body = sse({"error": {"type": "server_error", "message": "overloaded"}})
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=body), completion("fine")])
        result = await RoundRunner([entry(server, "a")], sleep=Sleeps()).run(REQUEST, Sink())
    assert result.response.text == "fine" and result.attempts == 2


async def test_retries_are_bounded_by_max_retries_with_exponential_backoff() -> None:
    async with ProviderServer() as server:
        server.script(PATH, [Reply.json({"error": {"message": "down"}}, status=503)])
        sleeps = Sleeps()
        with pytest.raises(RoundFailed) as failed:
            await RoundRunner([entry(server, "a", max_retries=3)], sleep=sleeps).run(
                REQUEST, Sink()
            )
    assert len(server.requests) == 4  # one stream + three blocking retries
    assert sleeps.calls == [0.5, 1.0, 2.0]
    assert failed.value.attempts == 4
    cause = "the model service failed (HTTP 503) after 4 tries: try again later"
    assert failed.value.cause == cause


async def test_auth_and_bad_request_are_not_retried() -> None:
    for status in (401, 400):
        async with ProviderServer() as server:
            server.script(PATH, [Reply.json({"error": {"message": "no"}}, status=status)])
            with pytest.raises(RoundFailed):
                await RoundRunner([entry(server, "a")], sleep=Sleeps()).run(REQUEST, Sink())
        assert len(server.requests) == 1, status


async def test_idle_timeout_is_never_sent_again_to_the_same_provider() -> None:
    async with ProviderServer() as server:
        server.script(PATH, [Reply.stall()])
        with pytest.raises(RoundFailed) as failed:
            await RoundRunner(
                [entry(server, "a", stream_idle_timeout_secs=0.3)], sleep=Sleeps()
            ).run(REQUEST, Sink())
    assert len(server.requests) == 1
    assert failed.value.cause == "the model did not answer in time"


async def test_failure_after_text_falls_back_to_the_next_provider() -> None:
    partial = sse(text_chunk("Let me compare the"))  # then EOF: truncated (case C08 A)
    async with ProviderServer() as server:
        server.script("/a/chat/completions", [Reply(body=partial)])
        server.script("/b/chat/completions", [Reply(body=answer_stream("B's answer"))])
        chain = [entry(server, "a", prefix="/a"), entry(server, "b", prefix="/b")]
        sink = Sink()
        result = await RoundRunner(chain, sleep=Sleeps()).run(REQUEST, sink)
    assert result.provider == "b" and result.attempts == 2
    assert len(server.requests_to("/a/chat/completions")) == 1  # never re-sent to A
    assert sink.events.count("restart") == 1 and sink.text() == "B's answer"
    assert result.ttft_ms is not None and result.ttft_ms >= 0
    assert result.response.usage is not None and result.response.usage.input_tokens == 7


async def test_truncated_stream_with_no_provider_left_fails_with_its_cause() -> None:
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=sse(text_chunk("par")))])
        with pytest.raises(RoundFailed) as failed:
            await RoundRunner([entry(server, "a")], sleep=Sleeps()).run(REQUEST, Sink())
    assert failed.value.cause == "the model stopped before finishing"


async def test_retry_after_is_honoured_in_real_time() -> None:
    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply.json(
                    {"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "1"}
                ),
                completion("after the wait"),
            ],
        )
        started = time.monotonic()
        result = await RoundRunner([entry(server, "a")]).run(REQUEST, Sink())
    assert result.response.text == "after the wait"
    gap = server.requests[1].received_at - server.requests[0].received_at
    assert gap >= 1.0, gap
    assert time.monotonic() - started >= 1.0


class BlockingOnly(OpenAIChatProvider):
    def supports_streaming(self) -> bool:
        return False


async def test_a_provider_that_cannot_stream_is_called_blocking() -> None:
    async with ProviderServer() as server:
        server.script(PATH, [Reply.json({"error": {"message": "x"}}, status=502), completion("ok")])
        config = ProviderConfig(
            kind="openai_chat", base_url=server.url + "/v1", api_key="k", model="m"
        )
        sleeps = Sleeps()
        result = await RoundRunner(
            [closed_after_test(ChainEntry(BlockingOnly("a", config), config))], sleep=sleeps
        ).run(REQUEST, Sink())
    assert [r.json["stream"] for r in server.requests] == [False, False]
    assert sleeps.calls == [0.5]
    assert result.attempts == 2 and result.ttft_ms is None


class NoToolEvents(OpenAIChatProvider):
    def supports_streaming_tool_events(self) -> bool:
        return False


async def test_tools_offered_to_a_provider_without_streamed_tool_events_go_blocking() -> None:
    async with ProviderServer() as server:
        server.script(PATH, [completion("ok")])
        config = ProviderConfig(
            kind="openai_chat", base_url=server.url + "/v1", api_key="k", model="m"
        )
        request = ChatRequest(REQUEST.messages, tools=(ToolSpec("t", "d"),))
        await RoundRunner([closed_after_test(ChainEntry(NoToolEvents("a", config), config))]).run(
            request, Sink()
        )
        assert server.requests[0].json["stream"] is False
        await RoundRunner([closed_after_test(ChainEntry(NoToolEvents("a", config), config))]).run(
            REQUEST, Sink()
        )
        assert server.requests[1].json["stream"] is True


async def test_ttft_of_a_streamed_round() -> None:
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=answer_stream("hi"), header_delay_secs=0.05)])
        sink = Sink()
        result = await RoundRunner([entry(server, "a")]).run(REQUEST, sink)
    assert result.ttft_ms is not None and result.ttft_ms >= 50
    assert isinstance(sink.events[-1], Final)


async def test_reasoning_effort_rejection_is_retried_once_through_the_responses_api(
    fixtures_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rejection = Reply.json(
        {
            "error": {
                "message": "Function tools with reasoning_effort are not supported for "
                "gpt-5.1 in /v1/chat/completions. Please use /v1/responses instead.",
                "type": "invalid_request_error",
                "param": "reasoning_effort",
            }
        },
        status=400,
    )
    async with ProviderServer() as server:
        server.script(PATH, [rejection])
        server.script("/v1/responses", [Reply.fixture(fixtures_dir / "responses_text_delta.sse")])
        request = ChatRequest(REQUEST.messages, tools=(ToolSpec("t", "d"),))
        sink = Sink()
        with caplog.at_level("WARNING"):
            result = await RoundRunner([entry(server, "a")], sleep=Sleeps()).run(request, sink)
    assert result.response.text == "Hello world"
    assert result.provider == "a" and result.attempts == 2
    assert [r.path for r in server.requests] == [PATH, "/v1/responses"]
    responses_body = server.requests[1].json
    assert responses_body is not None and responses_body["tools"][0]["name"] == "t"
    assert server.requests[1].headers["authorization"] == "Bearer sk-test"
    assert any("Responses API" in r.getMessage() for r in caplog.records)


async def test_a_corrupt_gzip_body_is_a_protocol_error_and_goes_blocking() -> None:
    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply(body=b"this is not gzip", headers={"Content-Encoding": "gzip"}),
                completion("ok"),
            ],
        )
        result = await RoundRunner([entry(server, "a")], sleep=Sleeps()).run(REQUEST, Sink())
    assert result.response.text == "ok" and result.attempts == 2


def test_error_snippets_never_cut_a_token_in_two() -> None:
    from providers.errors import snippet

    key = "sk-ant-api03-" + "A" * 60
    assert snippet("bad data " + key + " tail", 40) == "bad data …"
    assert snippet(key * 2, 40) == f"<{len(key) * 2} characters>"
    assert snippet("short", 40) == "short"


async def test_a_retry_after_longer_than_timeout_secs_goes_to_the_next_provider() -> None:
    async with ProviderServer() as server:
        server.script(
            "/a/chat/completions",
            [
                Reply.json(
                    {"error": {"message": "later"}}, status=429, headers={"Retry-After": "3600"}
                )
            ],
        )
        server.script("/b/chat/completions", [Reply(body=answer_stream("from b"))])
        sleeps = Sleeps()
        chain = [entry(server, "a", prefix="/a"), entry(server, "b", prefix="/b")]
        result = await RoundRunner(chain, sleep=sleeps).run(REQUEST, Sink())
    assert result.provider == "b" and result.response.text == "from b"
    assert sleeps.calls == []  # never waited the hour
    assert len(server.requests_to("/a/chat/completions")) == 1
