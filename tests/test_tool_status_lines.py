"""Tool status lines outside the engine (architecture §3 "Tool status"): the causes shown after
``✗ name:``, the lines of provider-run tools (``PreExecutedToolCall`` / ``PreExecutedToolResult``)
through a real driver on virtual time, and the approval prompt's wait for the chat's spacing."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.base import InboundMessage, WriteSpacing
from orchestrator.delivery.driver import DeliveryDriver
from orchestrator.delivery.events import AnswerEnded, RoundEnded, TextEmitted
from orchestrator.policy import ReplyPolicy
from orchestrator.tools.tool_status import CAUSE_CHARS, done_line, failed_line, short_cause
from orchestrator.turn.round_sink import RoundSink
from providers.events import PreExecutedToolCall, PreExecutedToolResult
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import make_turns, provider_config, sse, text_answer
from tests.policy_samples import SAMPLES, secret_part, windows

pytestmark = pytest.mark.usefixtures("closes_providers")

MULTI = FakeChannelConfig(
    stream_mode="multi_message", show_tool_status=True, draft_update_interval_ms=100
)


@pytest.mark.parametrize(
    ("cause", "shown"),
    [
        ("Error executing tool fail: disk full", "disk full"),
        (
            "there is no tool named 'x' (the tools are: a); it was not run",
            "there is no tool named 'x'",
        ),
        ("unknown time zone 'Mars/Olympus'; use an IANA name", "unknown time zone 'Mars/Olympus'"),
        ("the tool did not answer within 5 s", "the tool did not answer within 5 s"),
        ("x" * 80, "x" * (CAUSE_CHARS - 1) + "…"),
        ("   ", "failed"),
    ],
)
def test_a_cause_is_a_few_words(cause: str, shown: str) -> None:
    assert short_cause(cause) == shown
    assert failed_line("t", cause, str) == f"✗ t: {shown}"


def test_a_duration_is_shown_in_seconds_to_one_decimal() -> None:
    assert done_line("current_time", 0.04) == "✓ current_time 0.0 s"
    assert done_line("slow", 0.449) == "✓ slow 0.4 s"
    assert done_line("slow", 12.36) == "✓ slow 12.4 s"


def multi_message_sink() -> tuple[RecordingChannel, DeliveryDriver, RoundSink]:
    """A ``multi_message`` chat showing tool status, its driver and a round's sink."""
    channel = RecordingChannel(MULTI)
    policy = ReplyPolicy(channel="fake", chat_id="chat")
    driver = DeliveryDriver(channel, "chat", policy)
    return channel, driver, RoundSink(policy, driver)


@pytest.mark.looptime
async def test_provider_run_tools_finish_their_own_lines() -> None:
    channel, driver, sink = multi_message_sink()
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        sink.event(PreExecutedToolCall("web_search", '{"query": "x"}'))
        sink.event(PreExecutedToolCall("code_execution", "{}"))
        await anyio.sleep(0.5)
        # A result finishes the running call of its name, not the earliest one.
        sink.event(PreExecutedToolResult("code_execution", "{}", error="unavailable"))
        await anyio.sleep(1.0)
        sink.event(PreExecutedToolResult("web_search", "[]"))
        sink.event(PreExecutedToolResult("web_search", "[]"))  # no call left: ignored
        sink.event(PreExecutedToolCall("web_fetch", "{}"))  # no result before the round ends
        sink.end()
        driver.feed(RoundEnded())
        driver.feed(TextEmitted("Done."))
        driver.feed(AnswerEnded())
    assert channel.chat.visible() == [
        "✓ web_search 1.5 s",
        "✗ code_execution: unavailable",
        "✗ web_fetch: no result",
        "Done.",
    ]


@pytest.mark.looptime
async def test_a_write_elsewhere_waits_for_the_spacing_and_spaces_the_next_write() -> None:
    channel = RecordingChannel(FakeChannelConfig(draft_update_interval_ms=1000))
    policy = ReplyPolicy(channel="fake", chat_id="chat")
    driver = DeliveryDriver(channel, "chat", policy)
    stamps: list[float] = []

    async def prompt(spacing: WriteSpacing) -> str:
        stamps.append(anyio.current_time())
        await anyio.sleep(2.0)  # the user takes two seconds to answer
        return "yes"

    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        driver.feed(TextEmitted("Let me check."))
        await anyio.sleep(0.01)
        driver.feed(RoundEnded())
        assert await driver.write_elsewhere(prompt) == "yes"
        ended = anyio.current_time()
        driver.feed(TextEmitted(" Done."))
        driver.feed(AnswerEnded())
    [draft_at, *_] = [w.t for w in channel.chat.chat_writes()]
    # The prompt waited an interval after the narration's send, the next write an interval
    # after the prompt's end.
    assert stamps[0] == pytest.approx(draft_at + 1.0, abs=0.01)
    later = [w.t for w in channel.chat.chat_writes()][1:]
    assert later and later[0] >= ended + 1.0 - 0.01


# -- the turn's own calls ---------------------------------------------------------------------


def _two_calls_stream() -> bytes:
    calls = [
        {"index": 0, "id": "a", "type": "function"},
        {"index": 1, "id": "b", "type": "function"},
    ]
    calls[0]["function"] = {"name": "read_file", "arguments": "{}"}  # type: ignore[assignment]
    calls[1]["function"] = {"name": "current_time", "arguments": "{}"}  # type: ignore[assignment]
    return sse(
        {"choices": [{"index": 0, "delta": {"content": "Checking."}}]},
        *({"choices": [{"index": 0, "delta": {"tool_calls": [c]}}]} for c in calls),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    )


@pytest.mark.parametrize(("answer", "cause"), [(False, "denied"), (None, "not approved in time")])
async def test_a_refused_call_and_one_not_approved_end_with_their_causes(
    tmp_path: Path, answer: bool | None, cause: str
) -> None:
    """In ``multi_message`` with ``show_tool_status`` each line stays as its own message, so
    the chat keeps every finished form: an unknown tool (refused by the repeat guard) and a
    call the user denied, or nobody approved."""
    async with ProviderServer() as server:
        server.script(
            "/v1/chat/completions",
            [Reply(body=_two_calls_stream()), Reply(body=text_answer("Sorry."))],
        )
        turns, _ = make_turns(
            tmp_path, [provider_config(server)], require_approval=["current_time"]
        )
        config = FakeChannelConfig(
            stream_mode="multi_message", show_tool_status=True, draft_update_interval_ms=50
        )
        ch = RecordingChannel(config, approvals=[answer])
        with anyio.fail_after(20):
            await turns.run(ch, InboundMessage("fake", "c1", "u1", "user", "time?", "m1"))
    assert ch.prompts == ["Run current_time with {}?"]
    assert ch.chat.visible() == [
        "Checking.",
        "✗ read_file: no such tool",
        f"✗ current_time: {cause}",
        "Sorry.",
    ]


@pytest.mark.looptime
async def test_a_quick_answer_waits_for_the_spacing_before_the_prompts_outcome_edit() -> None:
    # The user answers 50 ms after the prompt landed: the adapter's outcome edit still waits
    # for the chat's interval after the prompt.
    channel = RecordingChannel(FakeChannelConfig(draft_update_interval_ms=1000))
    driver = DeliveryDriver(channel, "chat", ReplyPolicy(channel="fake", chat_id="chat"))
    times: dict[str, float] = {}

    async def prompt(spacing: WriteSpacing) -> bool:
        await anyio.sleep(0.1)  # the prompt's send
        spacing.landed()
        times["landed"] = anyio.current_time()
        await anyio.sleep(0.05)  # the press
        await spacing.next_write()
        times["edit"] = anyio.current_time()
        spacing.landed()
        return True

    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        assert await driver.write_elsewhere(prompt) is True
        driver.feed(AnswerEnded())
    assert times["edit"] == pytest.approx(times["landed"] + 1.0, abs=0.01)


@pytest.mark.looptime
async def test_a_provider_run_tool_cut_short_by_stop_ends_with_that_cause() -> None:
    channel, driver, sink = multi_message_sink()
    async with anyio.create_task_group() as tg:
        tg.start_soon(driver.run)
        sink.event(PreExecutedToolCall("web_search", '{"query": "x"}'))
        await anyio.sleep(0.5)
        sink.end("stopped")  # the turn's /stop ends the round (TurnRunner._cut_short)
        driver.feed(AnswerEnded())
    assert channel.chat.visible() == ["✗ web_search: stopped"]


@settings(max_examples=300, deadline=None)
@given(
    sample=st.sampled_from(SAMPLES),
    lead=st.text(alphabet="abc xyz'(=:/", max_size=70).map(lambda s: s + " "),  # a boundary
    trail=st.sampled_from(
        ["", "'", "; use another", ". Try again", " (see the docs)", " " + "x" * 30]
    ),
    name=st.sampled_from(["current_time", "lookup"]),
)
def test_a_cause_with_a_secret_never_shows_any_of_it(
    sample: tuple[str, str, str], lead: str, trail: str, name: str
) -> None:
    # The cause is redacted whole before it is cut to a few words: a cut first left a key's
    # first 13 characters visible ("unknown time zone 'Etc/Nowhere-Lo AKIAABCDEFGHI…").
    _, text, secret = sample
    hidden = secret_part(text, secret)
    redact = ReplyPolicy(channel="fake", chat_id="chat").redact_line
    line = redact(failed_line(name, f"{lead}{text}{trail}", redact))
    shown = re.sub(r"\[REDACTED:\w+\]", "\x00", line)  # a marker's name is no secret
    assert not windows(hidden) & {shown[i : i + 5] for i in range(len(shown))}, line
