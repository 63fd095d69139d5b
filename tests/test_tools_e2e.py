"""Tools end to end (architecture §5 "Tools", §3 "Tool status"): the real daemon against the
Telegram Bot API peer, the provider wire server (Chat Completions at ``/v1/chat/completions``,
Anthropic Messages at ``/v1/messages``) and the MCP peer of ``tests/peers/mcp_server.py`` as an
``agent.mcp_servers`` stdio server, all on 127.0.0.1."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from orchestrator.turn.tool_round import denied_error, unanswered_error
from tests.peers.provider_server import ProviderServer, Reply
from tests.peers.telegram import BotMessage, TelegramBotApiServer
from tests.pipeline import sse
from tests.telegram_harness import CHAT, Bot, fast_channels, serving

ROOT = Path(__file__).resolve().parent.parent
CHAT_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")

NARRATION = "Let me look that up and check the clock."
ANSWER = "The value is there and it is morning."

Call = tuple[str, str, dict[str, Any]]  # (id, name, arguments)


# -- provider streams -----------------------------------------------------------------------


def chat_calls(narration: str, calls: Sequence[Call], *, pause_secs: float = 0.0) -> Reply:
    """A Chat Completions stream: ``narration``, then (after ``pause_secs``) ``calls`` (one
    delta each), finish ``tool_calls``."""
    events: list[Any] = [{"choices": [{"index": 0, "delta": {"content": narration}}]}]
    for index, (call_id, name, arguments) in enumerate(calls):
        call = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        events.append({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    reply = _chat(events, "tool_calls")
    return replace(reply, pauses={1: pause_secs}) if pause_secs else reply


def chat_text(text: str) -> Reply:
    return _chat([{"choices": [{"index": 0, "delta": {"content": text}}]}], "stop")


def _chat(events: list[Any], finish: str) -> Reply:
    events = [*events, {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
    body, cuts = b"", []
    for event in events:
        body += sse(event)
        cuts.append(len(body))
    return Reply(body=body + sse("[DONE]"), cuts=cuts, delay_secs=0.02)


def anthropic_calls(narration: str, calls: Sequence[Call], *, stop_order: Sequence[int]) -> Reply:
    """A Messages stream: a text block, then one ``tool_use`` block per call (block ``1 + i``),
    all started first and stopped in ``stop_order`` (indexes into ``calls``)."""
    events: list[Any] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": narration},
        },
        {"type": "content_block_stop", "index": 0},
    ]
    for i, (call_id, name, _) in enumerate(calls):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        events.append({"type": "content_block_start", "index": 1 + i, "content_block": block})
    for i, (_, _, arguments) in enumerate(calls):
        delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
        events.append({"type": "content_block_delta", "index": 1 + i, "delta": delta})
    events += [{"type": "content_block_stop", "index": 1 + i} for i in stop_order]
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    return Reply(body=sse(*events))


def anthropic_text(text: str) -> Reply:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    return Reply(body=sse(*events))


# -- the bot --------------------------------------------------------------------------------


def _config(
    peer: TelegramBotApiServer,
    provider: ProviderServer,
    tmp_path: Path,
    *,
    chain: str,
    agent_extra: str,
    channel_extra: str,
) -> str:
    command = json.dumps([sys.executable, "-m", "tests.peers.mcp_server"])
    return f"""\
providers:
  main:
    kind: openai_chat
    base_url: "{provider.url}/v1"
    api_key: local-test-key
    model: m
    max_retries: 0
  backup:
    kind: anthropic
    base_url: "{provider.url}"
    api_key: local-test-key
    model: claude-test
    max_retries: 0
agent:
  providers: {chain}
  tools: [current_time]
  mcp_servers:
    peer:
      command: {command}
      cwd: "{ROOT}"
{agent_extra}channels:
  tg:
    kind: telegram
    token: "{peer.token}"
    base_url: "{peer.base_url}"
    draft_update_interval_ms: 150
    allowed_users: ["*"]
{channel_extra}storage:
  path: "{tmp_path / "relaybot.db"}"
server:
  listen: null
"""


@asynccontextmanager
async def tool_bot(
    tmp_path: Path,
    *,
    chat: Sequence[Reply] = (),
    messages: Sequence[Reply] = (),
    chain: str = "[main]",
    agent_extra: str = "",
    channel_extra: str = "",
    mode: str = "partial",
    multi_message_delay_ms: int = 300,
) -> AsyncIterator[Bot]:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(CHAT)
        if chat:
            provider.script(CHAT_PATH, list(chat))
        if messages:
            provider.script(MESSAGES_PATH, list(messages))
        text = _config(
            peer,
            provider,
            tmp_path,
            chain=chain,
            agent_extra=agent_extra,
            channel_extra=channel_extra,
        )
        config = load_config_text(text, source_name="tools.yaml", environ={})
        daemon = Daemon(
            config, storage_path=tmp_path / "relaybot.db", channel_factory=fast_channels
        )
        async with serving(daemon, peer):
            yield Bot(peer, provider, daemon, 150, mode, multi_message_delay_ms)


def _tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def _error(content: str) -> str:
    return str(json.loads(content)["error"])


# -- one round, an MCP tool and a built-in at once -------------------------------------------


PARALLEL: list[Call] = [
    ("call_a", "slow", {"seconds": 0.6}),
    ("call_b", "current_time", {"timezone": "UTC"}),
    ("call_c", "fail", {"reason": "disk full"}),
]
SLOW_DONE = re.compile(r"✓ slow (\d+\.\d) s")
TIME_DONE = re.compile(r"✓ current_time \d+\.\d s")
FAIL_DONE = "✗ fail: disk full"


def _check_parallel_results(bot: Bot, slept: str = "0.6") -> None:
    second = bot.provider.requests_to(CHAT_PATH)[1].json
    assert [t["function"]["name"] for t in second["tools"]][:2] == ["current_time", "lookup"]
    results = _tool_messages(second)
    assert [r["tool_call_id"] for r in results] == ["call_a", "call_b", "call_c"]
    assert results[0]["content"] == f"slept {slept}"
    assert json.loads(results[1]["content"])["timezone"] == "UTC"
    assert _error(results[2]["content"]) == "Error executing tool fail: disk full"


async def test_an_mcp_tool_and_a_built_in_run_in_one_round_each_with_its_status_line(
    tmp_path: Path,
) -> None:
    """``partial``: the round's lines are the draft's last lines, each edited in place from
    ``⏳`` to its finished form, and gone from the final text. The stream pauses after the
    narration, so the edit with the lines is due at once when the calls arrive (before the
    built-in one has finished)."""
    replies = [chat_calls(NARRATION, PARALLEL, pause_secs=0.4), chat_text(ANSWER)]
    async with tool_bot(tmp_path, chat=replies) as bot:
        await bot.ask("look it up")
    bot.check()
    [message] = bot.peer.messages(CHAT)
    assert message.text == f"{NARRATION}\n\n{ANSWER}"
    states = [s[0] for s in bot.peer.states(CHAT)]
    running = f"{NARRATION}\n\n⏳ slow…\n⏳ current_time…\n⏳ fail…"
    # The lines at once, in content order, under the narration; then each finished.
    at_running = states.index(running)
    lines = [s.split("\n\n", 1)[1].split("\n") for s in states[at_running:]]
    finished = next(
        i
        for i, (slow, clock, failed) in enumerate(ln for ln in lines if len(ln) == 3)
        if SLOW_DONE.fullmatch(slow) and TIME_DONE.fullmatch(clock) and failed == FAIL_DONE
    )
    for slow, clock, failed in lines[: finished + 1]:  # each line running, then finished
        assert slow == "⏳ slow…" or SLOW_DONE.fullmatch(slow)
        assert clock == "⏳ current_time…" or TIME_DONE.fullmatch(clock)
        assert failed in ("⏳ fail…", FAIL_DONE)
    done = states[at_running + finished]
    slow_secs = SLOW_DONE.search(done)
    assert slow_secs is not None and 0.6 <= float(slow_secs.group(1)) < 3
    # Before the lines, only the narration (the policy's window may hold it back until the
    # round ends: then it comes in the same edit, above them).
    assert all(NARRATION.startswith(state) for state in states[:at_running])
    assert at_running < states.index(done) < states.index(message.text)
    assert states[-1] == message.text  # no status line in the final text
    _check_parallel_results(bot)


async def test_parallel_mcp_calls_run_concurrently(tmp_path: Path) -> None:
    # meet answers "met" only when both calls are inside the server at the same time.
    calls: list[Call] = [("m1", "meet", {"size": 2}), ("m2", "meet", {"size": 2})]
    async with tool_bot(tmp_path, chat=[chat_calls("Meeting.", calls), chat_text("Done.")]) as bot:
        await bot.ask("meet")
    results = _tool_messages(bot.provider.requests_to(CHAT_PATH)[1].json)
    assert [r["content"] for r in results] == ["met", "met"]


async def test_multi_message_with_tool_status_edits_each_status_message_when_its_call_ends(
    tmp_path: Path,
) -> None:
    """``multi_message`` with ``show_tool_status``: each call's line is its own message, edited
    to its finished form when the call ends; a call that ended before its line could be sent
    (sends are ``multi_message_delay_ms`` apart) has it sent finished (latest text wins)."""
    calls = [("call_a", "slow", {"seconds": 1.5}), *PARALLEL[1:]]
    extra = (
        "    stream_mode: multi_message\n    show_tool_status: true\n"
        "    multi_message_delay_ms: 300\n"
    )
    async with tool_bot(
        tmp_path,
        chat=[chat_calls(NARRATION, calls), chat_text(ANSWER)],
        channel_extra=extra,
        mode="multi_message",
    ) as bot:
        await bot.ask("look it up")
    bot.check()
    texts = bot.peer.texts(CHAT)
    assert len(texts) == 5 and texts[0] == NARRATION and texts[-1] == ANSWER
    assert SLOW_DONE.fullmatch(texts[1]) and TIME_DONE.fullmatch(texts[2])
    assert texts[3] == FAIL_DONE
    writes = [
        (c.method.lower(), c.params.get("message_id"), c.params["text"]) for c in bot.writes()
    ]
    sends = [text for method, _, text in writes if method == "sendmessage"]
    assert sends[:2] == [NARRATION, "⏳ slow…"] and sends[-1] == ANSWER
    assert sends[2] == "⏳ current_time…" or TIME_DONE.fullmatch(sends[2])
    assert sends[3] in ("⏳ fail…", FAIL_DONE)
    slow_id = bot.peer.messages(CHAT)[1].message_id
    edits = [(i, text) for i, (method, mid, text) in enumerate(writes) if mid == slow_id]
    [(edited_at, edited)] = edits  # edited once, to its finished form, before the answer
    assert SLOW_DONE.fullmatch(edited)
    assert edited_at < max(i for i, (_, _, text) in enumerate(writes) if text == ANSWER)
    _check_parallel_results(bot, slept="1.5")


@pytest.mark.parametrize("mode", ["partial", "multi_message"])
async def test_a_secret_in_a_failed_calls_cause_never_shows_in_its_status_line(
    tmp_path: Path, mode: str
) -> None:
    # The cause ("unknown time zone '…'") quotes the model's argument; it is cut to a few words
    # after it is redacted, so no state of the chat shows any part of the key (a cut first
    # left "AKIAABCDEFGHI…" in the line).
    key = "AKIAABCDEFGHIJKLMNOP"
    calls: list[Call] = [("c1", "current_time", {"timezone": f"Etc/Nowhere-Lo {key}"})]
    extra = "    show_tool_status: true\n" if mode == "multi_message" else ""
    if mode == "multi_message":
        extra = "    stream_mode: multi_message\n" + extra
    async with tool_bot(
        tmp_path,
        # The answer comes a second later: the finished line shows in the chat meanwhile.
        chat=[chat_calls(NARRATION, calls), replace(chat_text(ANSWER), pauses={0: 1.0})],
        channel_extra=extra,
        mode=mode,
    ) as bot:
        await bot.ask("what time is it there?")
    states = bot.peer.states(CHAT)
    assert any("✗ current_time: unknown time zone" in "".join(s) for s in states)
    assert not any("AKIA" in "".join(s) for s in states)
    assert not any("AKIA" in (c.params.get("text") or "") for c in bot.writes())


# -- approvals ------------------------------------------------------------------------------


def _is_prompt(message: BotMessage) -> bool:
    """An approval prompt (the answer's own messages carry a Stop button)."""
    rows = (message.reply_markup or {}).get("inline_keyboard", [])
    return any(button["text"].startswith("✅") for row in rows for button in row)


async def _press_when_asked(bot: Bot, answer: str) -> None:
    await bot.peer.wait_for(lambda: any(_is_prompt(m) for m in bot.peer.messages(CHAT)), 15)
    prompt = next(m for m in bot.peer.messages(CHAT) if _is_prompt(m))
    assert prompt.reply_markup is not None
    button = prompt.reply_markup["inline_keyboard"][0][0 if answer == "y" else 1]
    bot.peer.inject_callback_query(CHAT, prompt.message_id, button["callback_data"])


async def test_a_denied_call_is_not_run_and_the_model_is_told_the_user_denied_it(
    tmp_path: Path,
) -> None:
    key = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"  # the prompt shows it redacted
    calls: list[Call] = [("c1", "lookup", {"key": key})]
    agent = "  require_approval: [lookup]\n"
    replies = [chat_calls(NARRATION, calls), chat_text("I was not allowed to look.")]
    async with tool_bot(tmp_path, chat=replies, agent_extra=agent) as bot:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_press_when_asked, bot, "n")
            await bot.ask("look it up", within=30)
    # The narration was delivered before the prompt, which shows the arguments; the answer
    # continues the draft.
    prompts = [c for c in bot.peer.calls_to("sendMessage", CHAT) if "✅" in str(c.params)]
    [prompt] = prompts
    shown = prompt.params["text"]
    assert shown.startswith('Run lookup with {"key": "[REDACTED:') and shown.endswith('"}?')
    assert not any(key in (c.params.get("text") or "") for c in bot.writes())
    before = [c for c in bot.writes() if c.at < prompt.at]
    assert before and before[-1].params["text"] == f"{NARRATION}\n\n⏳ lookup…"
    draft, answered = bot.peer.texts(CHAT)
    assert draft == f"{NARRATION}\n\nI was not allowed to look."
    assert answered == f"{shown}\n\n❌ Denied"
    [result] = _tool_messages(bot.provider.requests_to(CHAT_PATH)[1].json)
    assert result["content"] == denied_error("lookup")
    assert "denied" in _error(result["content"])
    bot.check()  # the prompt's outcome edit, made at once on the press, kept the spacing too


async def test_an_unanswered_approval_times_out_and_the_model_is_told_nobody_answered(
    tmp_path: Path,
) -> None:
    calls: list[Call] = [("c1", "lookup", {"key": "a"})]
    agent = '  require_approval: "*"\n  approval_timeout_secs: 0.5\n'
    replies = [chat_calls(NARRATION, calls), chat_text("Nobody let me look.")]
    async with tool_bot(tmp_path, chat=replies, agent_extra=agent) as bot:
        await bot.ask("look it up", within=30)
    assert any("No answer: not approved" in t for t in bot.peer.texts(CHAT))
    [result] = _tool_messages(bot.provider.requests_to(CHAT_PATH)[1].json)
    assert result["content"] == unanswered_error("lookup", 0.5)
    assert "nobody answered" in _error(result["content"])
    assert "did not deny" in _error(result["content"])


async def test_an_approval_name_no_tool_has_stops_the_start(tmp_path: Path) -> None:
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        text = _config(
            peer,
            provider,
            tmp_path,
            chain="[main]",
            agent_extra="  require_approval: [lookup, lokup]\n",
            channel_extra="",
        )
        config = load_config_text(text, source_name="tools.yaml", environ={})
        daemon = Daemon(
            config, storage_path=tmp_path / "relaybot.db", channel_factory=fast_channels
        )
        with anyio.fail_after(30):
            assert await daemon.run(handle_signals=False) == 1
        assert not peer.calls_to("getUpdates")


# -- ids, repeats, order, and a fallback to Anthropic ---------------------------------------


async def test_foreign_and_reused_ids_and_a_repeated_call_then_a_fallback_to_anthropic(
    tmp_path: Path,
) -> None:
    same: dict[str, Any] = {"timezone": "UTC"}
    chat = [
        chat_calls("One.", [("functions.current_time:0", "current_time", same)]),
        chat_calls("Two.", [("call_0", "current_time", same)]),
        chat_calls("Three.", [("call_0", "current_time", same)]),  # a third identical call
        Reply.json({"error": {"message": "overloaded"}}, status=500),
    ]
    async with tool_bot(
        tmp_path, chat=chat, messages=[anthropic_text(ANSWER)], chain="[main, backup]"
    ) as bot:
        await bot.ask("what time is it?")
    [message] = bot.peer.messages(CHAT)
    assert message.text.endswith(ANSWER)
    assert "Answer interrupted" not in message.text
    [fallback] = bot.provider.requests_to(MESSAGES_PATH)
    body = fallback.json
    # The repeat guard refused the third call: the last round offers no tools.
    assert "tools" not in body
    uses = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    results = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]
    ids = [u["id"] for u in uses]
    assert all(ANTHROPIC_ID.match(i) for i in ids) and len(set(ids)) == 3
    assert [r["tool_use_id"] for r in results] == ids
    assert "already ran 2 times" in results[2]["content"]
    assert "timezone" in results[0]["content"] and "timezone" in results[1]["content"]


async def test_an_unknown_tool_is_refused_once_and_the_model_answers_without_tools(
    tmp_path: Path,
) -> None:
    chat = [chat_calls("Reading.", [("r1", "read_file", {"path": "/etc"})]), chat_text(ANSWER)]
    async with tool_bot(tmp_path, chat=chat) as bot:
        await bot.ask("read it")
    requests = bot.provider.requests_to(CHAT_PATH)
    assert len(requests) == 2
    [result] = _tool_messages(requests[1].json)
    assert "there is no tool named 'read_file'" in _error(result["content"])
    assert "tools" not in requests[1].json
    assert bot.peer.texts(CHAT)[-1].endswith(ANSWER)


async def test_anthropic_tool_use_blocks_are_answered_in_content_order(tmp_path: Path) -> None:
    calls: list[Call] = [
        ("toolu_A", "lookup", {"key": "first"}),
        ("toolu_B", "lookup", {"key": "second"}),
    ]
    messages = [anthropic_calls(NARRATION, calls, stop_order=[1, 0]), anthropic_text(ANSWER)]
    async with tool_bot(tmp_path, messages=messages, chain="[backup]") as bot:
        await bot.ask("look both up")
    second = bot.provider.requests_to(MESSAGES_PATH)[1].json
    assistant, results = second["messages"][-2:]
    assert [b.get("id") for b in assistant["content"] if b["type"] == "tool_use"] == [
        "toolu_A",
        "toolu_B",
    ]
    assert [(r["tool_use_id"], r["content"]) for r in results["content"]] == [
        ("toolu_A", "value of first"),
        ("toolu_B", "value of second"),
    ]
    assert bot.peer.texts(CHAT)[-1].endswith(ANSWER)
