"""The whole reply pipeline end to end (issue: foundation; architecture §3 "What the chat shows",
§5).

A local OpenAI-compatible server replays recorded streams over real HTTP; the reply goes through
the real round runner, turn loop, outbound policy and delivery driver into a recording channel.
These run in real time (real sockets), so intervals are short.
"""

from __future__ import annotations

import logging
from itertools import pairwise
from pathlib import Path

import anyio
import pytest

from channels.base import InboundMessage
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import (
    RecordingTools,
    make_turns,
    provider_config,
    sse,
    text_answer,
    tool_call_stream,
)

pytestmark = pytest.mark.usefixtures("closes_providers")

PATH = "/v1/chat/completions"
INTERVAL_MS = 150
ANSWER = (
    "In UTC it is morning, and in Tokyo it is already evening. Both clocks were read just now "
    "with the current_time tool, so these times are exact to the second."
)


def inbound(text: str, chat_id: str = "c1") -> InboundMessage:
    return InboundMessage("fake", chat_id, "u1", "user", text, "m1")


def channel(mode: str = "partial", **kw: object) -> RecordingChannel:
    return RecordingChannel(
        FakeChannelConfig(stream_mode=mode, draft_update_interval_ms=INTERVAL_MS, **kw)  # type: ignore[arg-type]
    )


def assert_spacing(ch: RecordingChannel, interval_ms: int = INTERVAL_MS) -> None:
    times = [w.t for w in ch.chat.chat_writes()]
    for earlier, later in pairwise(times):
        assert later - earlier >= interval_ms / 1000 - 1e-6, (earlier, later)


async def test_tool_round_then_answer_in_partial_mode(tmp_path: Path, fixtures_dir: Path) -> None:
    tools = RecordingTools()
    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply.fixture(fixtures_dir / "openai_chat_tool_call_chunked.sse"),
                Reply(body=text_answer(ANSWER), delay_secs=0.01, cuts=range(0, 4000, 97)),
            ],
        )
        turns, store = make_turns(tmp_path, [provider_config(server)], tools=tools.registry)
        ch = channel()
        with anyio.fail_after(20):
            outcome = await turns.run(ch, inbound("What time is it in UTC and Tokyo?"))

    assert outcome.outcome == "ok" and outcome.rounds == 2
    # The tool ran twice, with the arguments the model streamed in fragments.
    assert tools.calls == [
        ("current_time", {"timezone": "UTC"}),
        ("current_time", {"timezone": "Asia/Tokyo"}),
    ]
    # The second request carries both results, each answering its call by id.
    second = server.requests[1].json
    assert second is not None
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a1", "call_b2"]
    results = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["call_a1", "call_b2"]
    assert '"timezone": "Asia/Tokyo"' in results[1]["content"]
    # Every write at least the interval after the previous one.
    assert_spacing(ch)
    # What the chat shows: one message, narration, a blank line, the answer; formatted at the end.
    assert ch.chat.visible() == ["Let me check the time.\n\n" + ANSWER]
    assert ch.chat.visible_messages()[0].formatted
    # While the tools ran, the draft's last line was the status.
    assert any(state and state[-1].endswith("⏳ current_time…") for _, state in ch.chat.states)
    # The conversation and the rounds are stored.
    assert [m.role for m in store.history("fake", "c1")] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    records = store.rounds()
    assert [r.outcome for r in records] == ["tool_calls", "ok"]
    assert records[0].input_tokens == 57
    assert records[1].ttft_ms is not None


async def test_history_continues_after_a_restart(tmp_path: Path) -> None:
    async with ProviderServer() as server:
        server.script(
            PATH, [Reply(body=text_answer("First answer.")), Reply(body=text_answer("Second."))]
        )
        turns, store = make_turns(tmp_path, [provider_config(server)])
        await turns.run(channel(), inbound("one"))
        store.close()
        turns, store = make_turns(tmp_path, [provider_config(server)])  # a restarted bot
        await turns.run(channel(), inbound("two"))
    messages = server.requests[1].json["messages"]  # type: ignore[index]
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "one"),
        ("assistant", "First answer."),
        ("user", "two"),
    ]


async def test_max_tool_rounds_then_one_call_without_tools(tmp_path: Path) -> None:
    call = tool_call_stream("current_time", "{}")
    async with ProviderServer() as server:
        server.script(
            PATH, [Reply(body=call), Reply(body=call), Reply(body=text_answer("Summary."))]
        )
        turns, _ = make_turns(tmp_path, [provider_config(server)], max_tool_rounds=2)
        ch = channel()
        outcome = await turns.run(ch, inbound("loop"))
    assert outcome.rounds == 3
    bodies = [r.json for r in server.requests]
    assert [bool(b.get("tools")) for b in bodies] == [True, True, False]  # type: ignore[union-attr]
    assert "No more tool calls" in bodies[2]["messages"][-1]["content"]  # type: ignore[index]
    assert ch.chat.visible() == ["Summary."]


async def test_unparseable_tool_arguments_get_a_tool_error(tmp_path: Path) -> None:
    bad = tool_call_stream("current_time", '{"timezone": ')
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=bad), Reply(body=text_answer("Sorry."))])
        turns, _ = make_turns(tmp_path, [provider_config(server)])
        outcome = await turns.run(channel(), inbound("time?"))
    assert outcome.outcome == "ok"
    messages = server.requests[1].json["messages"]  # type: ignore[index]
    tool_message = next(m for m in messages if m["role"] == "tool")
    assert "error" in tool_message["content"]


PARTIAL_TEXT = (
    "Here is the comparison you asked for. The first option is cheaper over one year, while the "
    "second one costs less once maintenance is included, and the difference grows with every"
)
TEXT_CHUNK = {"choices": [{"index": 0, "delta": {"content": PARTIAL_TEXT}}]}


@pytest.mark.parametrize(
    ("reply", "cause", "overrides"),
    [
        # text, then an event that is not JSON
        (
            Reply(body=sse(TEXT_CHUNK) + b"data: {garbage\n\n"),
            "the model stopped before finishing",
            {},
        ),
        # text, then the server closes early (no finish_reason, no [DONE])
        (Reply(body=sse(TEXT_CHUNK)), "the model stopped before finishing", {}),
        # text, then nothing: the byte-idle timeout
        (
            Reply(body=sse(TEXT_CHUNK), hold_open=True),
            "the model did not answer in time",
            {"stream_idle_timeout_secs": 1},
        ),
        # headers, then nothing
        (Reply.stall(), "the model did not answer in time", {"stream_idle_timeout_secs": 1}),
    ],
    ids=["garbage", "closed-early", "idle-after-text", "headers-then-nothing"],
)
@pytest.mark.parametrize("mode", ["partial", "off", "multi_message"])
async def test_bad_streams_end_with_the_interrupted_marker(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    cause: str,
    overrides: dict[str, object],
    mode: str,
) -> None:
    caplog.set_level(logging.WARNING)
    async with ProviderServer() as server:
        server.script(PATH, [reply])
        turns, store = make_turns(tmp_path, [provider_config(server, **overrides)])
        ch = channel(mode)
        with anyio.fail_after(15):
            outcome = await turns.run(ch, inbound("compare"))
    marker = f"⚠️ Answer interrupted: {cause}"
    assert outcome.outcome == "interrupted" and outcome.cause == cause
    shown = "\n\n".join(ch.chat.visible())
    assert shown.endswith(marker)
    if reply.body:
        # The text that was received is kept, before the marker.
        assert shown.startswith(PARTIAL_TEXT)
    # No state a user saw presented the cut text as complete.
    if mode == "multi_message":  # pieces stand; the marker is its own, last message
        assert ch.chat.visible()[-1] == marker
        assert ch.chat.chat_writes("send")[-1].text == marker
    else:  # the only formatted (final) text carries the marker
        finals = [w for w in ch.chat.chat_writes("send", "edit") if w.formatted]
        assert finals and all(marker in w.text for w in finals)
    assert len(server.requests) == 1  # after text or a timeout, never sent again
    assert any(cause in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert store.rounds()[-1].outcome == "interrupted"


async def test_failure_before_text_whose_blocking_retries_fail_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    slept: list[float] = []

    async def no_wait(seconds: float) -> None:
        slept.append(seconds)

    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply(body=b"data: {garbage\n\n"),
                Reply.json({"error": {"message": "down"}}, status=500),
            ],
        )
        turns, _ = make_turns(tmp_path, [provider_config(server)], sleep=no_wait)
        ch = channel()
        outcome = await turns.run(ch, inbound("hi"))
    assert [r.json["stream"] for r in server.requests] == [True, False, False]  # type: ignore[index]
    assert slept == [0.5, 1.0]
    cause = "the model service failed (HTTP 500) after 3 tries: try again later"
    assert ch.chat.visible() == [f"⚠️ Answer interrupted: {cause}"]
    assert outcome.outcome == "interrupted"
    assert any(cause in r.getMessage() for r in caplog.records)


async def test_length_finish_is_not_presented_as_complete(tmp_path: Path) -> None:
    body = sse(
        {"choices": [{"index": 0, "delta": {"content": "A long story that"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
        "[DONE]",
    )
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=body)])
        turns, _ = make_turns(tmp_path, [provider_config(server)])
        ch = channel()
        await turns.run(ch, inbound("story"))
    assert ch.chat.visible() == [
        "A long story that\n\n⚠️ Answer interrupted: the model stopped before finishing"
    ]


@pytest.mark.parametrize(
    "body",
    [
        sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, "[DONE]"),
        text_answer("   \n  "),
        sse(
            {"choices": [{"index": 0, "delta": {"content": "<think>only thoughts"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            "[DONE]",
        ),
    ],
    ids=["empty", "whitespace", "reasoning-only"],
)
@pytest.mark.parametrize("mode", ["partial", "off", "multi_message"])
async def test_no_answer_at_all_is_said_in_the_chat(tmp_path: Path, body: bytes, mode: str) -> None:
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=body)])
        turns, _ = make_turns(tmp_path, [provider_config(server)])
        ch = channel(mode)
        outcome = await turns.run(ch, inbound("hi"))
    assert outcome.outcome == "interrupted"
    assert ch.chat.visible()[-1].endswith("⚠️ Answer interrupted: the model sent no answer")


async def test_tool_calls_in_the_summary_round_are_no_answer(tmp_path: Path) -> None:
    call = tool_call_stream("current_time", "{}")
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=call)])  # the model never stops calling tools
        turns, _ = make_turns(tmp_path, [provider_config(server)], max_tool_rounds=1)
        ch = channel()
        outcome = await turns.run(ch, inbound("loop"))
    assert outcome.rounds == 2 and outcome.outcome == "interrupted"
    assert ch.chat.visible() == ["⚠️ Answer interrupted: the model sent no answer"]


@pytest.mark.parametrize("mode", ["partial", "off", "multi_message"])
async def test_think_in_the_middle_of_prose_is_shown_whole(tmp_path: Path, mode: str) -> None:
    """The field case: a ``<think>`` in the middle of an answer hid everything after it (34 of
    131 characters shown, as complete). Only a block that opens the answer is reasoning."""
    answer = (
        "Wrap the plan in <think> and </think> tags, then the model keeps it apart. "
        "Everything after the tag is still part of this answer."
    )
    opening = "<think>plan the reply</think>"
    async with ProviderServer() as server:
        server.script(
            PATH,
            [
                Reply(body=text_answer(answer), cuts=range(0, 6000, 23)),
                Reply(body=text_answer(opening + answer, words=False), cuts=range(0, 6000, 5)),
            ],
        )
        turns, store = make_turns(tmp_path, [provider_config(server)])
        for _ in range(2):
            ch = channel(mode)
            with anyio.fail_after(15):
                outcome = await turns.run(ch, inbound("how do I hide reasoning?"))
            assert outcome.outcome == "ok"
            assert "".join(ch.chat.visible()) == answer
    assert [m.content for m in store.history("fake", "c1") if m.role == "assistant"] == [
        answer,
        answer,
    ]
