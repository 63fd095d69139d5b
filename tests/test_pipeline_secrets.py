"""Case C18 through the whole pipeline: a local provider streams the key in pieces over HTTP,
and the real turn loop, policy and delivery driver write into a recording channel. Every state
a user could have seen (every send and edit, failed ones included) is checked, in every mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels.base import InboundMessage
from tests.fakes import FakeChannelConfig, RecordingChannel
from tests.peers.provider_server import ProviderServer, Reply
from tests.pipeline import make_turns, provider_config, sse, tool_call_stream

pytestmark = pytest.mark.usefixtures("closes_providers")

PATH = "/v1/chat/completions"
KEY = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ"


def deltas(*texts: str, finish: str = "stop") -> bytes:
    chunks: list[object] = [{"choices": [{"index": 0, "delta": {"content": t}}]} for t in texts]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return sse(*chunks, "[DONE]")


def windows(secret: str, size: int = 5) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def assert_never_shown(ch: RecordingChannel, secret: str) -> None:
    seen = [w.text for w in ch.chat.writes] + [t for _, state in ch.chat.states for t in state]
    for text in seen:
        for piece in windows(secret):
            assert piece not in text, (piece, text)


def channel(mode: str, **kw: object) -> RecordingChannel:
    config = FakeChannelConfig(
        stream_mode=mode,  # type: ignore[arg-type]
        draft_update_interval_ms=60,
        multi_message_delay_ms=60,
        **kw,  # type: ignore[arg-type]
    )
    return RecordingChannel(config)


MODES = [
    ("partial", {}),
    ("off", {}),
    ("multi_message", {"multi_message_unit": "paragraph"}),
    ("multi_message", {"multi_message_unit": "turn"}),
]


@pytest.mark.parametrize(("mode", "extra"), MODES)
async def test_c18_key_split_across_deltas(
    tmp_path: Path, mode: str, extra: dict[str, object]
) -> None:
    body = deltas("key: sk-ant-api03-", "AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH", "IIIIJJJJ done")
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=body, delay_secs=0.05, cuts=[100, 220, 300])])
        turns, _ = make_turns(tmp_path, [provider_config(server)])
        ch = channel(mode, **extra)
        await turns.run(ch, InboundMessage("fake", "c", "u", "u", "key?", "1"))
    assert_never_shown(ch, KEY)
    assert "\n\n".join(ch.chat.visible()) == "key: [REDACTED:anthropic_key] done"


@pytest.mark.parametrize(("mode", "extra"), MODES)
async def test_c18_key_split_across_a_tool_round(
    tmp_path: Path, mode: str, extra: dict[str, object]
) -> None:
    aws = "AKIAABCDEFGHIJKLMNOP"
    first = tool_call_stream("current_time", "{}", narration="Checking the clock for AKIAABCDEFGH")
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=first), Reply(body=deltas("IJKLMNOP is the id. Done."))])
        turns, _ = make_turns(tmp_path, [provider_config(server)])
        ch = channel(mode, **extra)
        outcome = await turns.run(ch, InboundMessage("fake", "c", "u", "u", "go", "1"))
    assert outcome.rounds == 2
    assert_never_shown(ch, aws)
    shown = "\n\n".join(ch.chat.visible())
    assert "[REDACTED:aws_access_key]" in shown and shown.endswith("is the id. Done.")


@pytest.mark.parametrize("mode", ["partial", "multi_message", "off"])
async def test_c18_key_split_between_two_messages(tmp_path: Path, mode: str) -> None:
    # A long answer whose overflow cut falls near the key, on a small message limit.
    prose = "word " * 70  # 350 characters
    body = deltas(
        prose, "and the key: sk-ant-api03-AAAABBBB", "CCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJ", " end"
    )
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=body, delay_secs=0.05, cuts=[200, 400, 600])])
        turns, _ = make_turns(tmp_path, [provider_config(server)])
        ch = channel(mode, max_length=380)
        await turns.run(ch, InboundMessage("fake", "c", "u", "u", "key?", "1"))
    assert_never_shown(ch, KEY)
    joined = " ".join(t.strip() for t in ch.chat.visible())
    assert "[REDACTED:anthropic_key] end" in joined
    assert all(len(t) <= 380 for t in ch.chat.visible())


@pytest.mark.parametrize("mode", ["partial", "off", "multi_message"])
async def test_an_approval_prompt_never_shows_a_key_in_the_tool_arguments(
    tmp_path: Path, mode: str
) -> None:
    """Tool arguments shown in a chat cross the policy (architecture §4), in every form the model's
    JSON may hold them; what goes to the tool stays as the model wrote it."""
    arguments = '{"timezone": "sk\\u002dant\\u002dapi03-AAAABBBBCCCCDDDDEEEEFFFFGGGG", "x": 1}'
    first = tool_call_stream("current_time", arguments, narration="One moment.")
    async with ProviderServer() as server:
        server.script(PATH, [Reply(body=first), Reply(body=deltas("Done."))])
        turns, _ = make_turns(
            tmp_path, [provider_config(server)], require_approval=["current_time"]
        )
        config = FakeChannelConfig(
            stream_mode=mode,  # type: ignore[arg-type]
            draft_update_interval_ms=60,
            multi_message_delay_ms=60,
        )
        ch = RecordingChannel(config, approvals=[False])
        await turns.run(ch, InboundMessage("fake", "c", "u", "u", "go", "1"))
    assert len(ch.prompts) == 1
    assert "AAAABBBB" not in ch.prompts[0] and "[REDACTED:anthropic_key]" in ch.prompts[0]
    assert_never_shown(ch, "AAAABBBBCCCCDDDDEEEEFFFFGGGG")
