"""A long chat against a model with a small, strict context window (architecture §5 "Context
budget"): the real daemon, the Telegram Bot API peer and :class:`~tests.peers.limited_model.
LimitedModel` (4,000 tokens, HTTP 400 ``context_length_exceeded`` past them), all on 127.0.0.1.

300 messages of some hundreds of characters each outgrow the window many times over: every one
is answered, at most one request is ever refused, and the user is told once that older
messages are no longer sent.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from config.loader import load_config_text
from orchestrator.ops.daemon import Daemon
from orchestrator.store import open_store
from orchestrator.turn.answering import TRIM_NOTICE
from orchestrator.turn.compaction import SUMMARY_HEADING, SUMMARY_PROMPT
from tests.peers.limited_model import LimitedModel
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_harness import CHAT, ObservedTelegramChannel, fast_channels, serving

pytestmark = pytest.mark.anyio

MESSAGES = 300
LIMIT = 4000


def _config(
    peer: TelegramBotApiServer, model: LimitedModel, tmp: Path, window: int, compaction: str
) -> str:
    return f"""\
providers:
  main:
    kind: openai_chat
    base_url: "{model.url}/v1"
    api_key: local-test-key
    model: m
    max_tokens: 200
    context_window: {window}
agent:
  providers: [main]
  tools: []
  history:
    compaction: {compaction}
channels:
  tg:
    kind: telegram
    token: "{peer.token}"
    base_url: "{peer.base_url}"
    stream_mode: "off"
    draft_update_interval_ms: 50
    allowed_users: ["*"]
storage:
  path: "{tmp / "relaybot.db"}"
server:
  listen: null
"""


def _question(n: int) -> str:
    return f"Question {n}: " + " ".join(f"word{n}-{i}" for i in range(40))  # ~350 characters


async def _chat(
    tmp_path: Path,
    window: int,
    *,
    compaction: str = "drop",
    messages: int = MESSAGES,
    texts: list[str] | None = None,
) -> tuple[LimitedModel, list[str]]:
    """Run ``messages`` questions (or ``texts``) through the daemon, each answered before the
    next; the model peer and the chat's texts."""
    sent = texts if texts is not None else [_question(n) for n in range(messages)]
    marker = SUMMARY_PROMPT[:40]
    async with (
        TelegramBotApiServer() as peer,
        LimitedModel(context_limit=LIMIT, summary_marker=marker) as model,
    ):
        peer.open_chat(CHAT)
        text = _config(peer, model, tmp_path, window, compaction)
        config = load_config_text(text, source_name="e2e.yaml", environ={})
        daemon = Daemon(
            config, storage_path=tmp_path / "relaybot.db", channel_factory=fast_channels
        )
        async with serving(daemon, peer):
            channel = daemon.channels["tg"]
            assert isinstance(channel, ObservedTelegramChannel)
            for text in sent:
                before = channel.replies_finished
                peer.inject_message(CHAT, text)
                with anyio.fail_after(20):
                    await channel.wait_replies(before + 1)
            await peer.wait_for(lambda: len(peer.texts(CHAT)) >= len(sent) + 1)
        return model, peer.texts(CHAT)


async def test_a_long_chat_stays_within_the_window(tmp_path: Path) -> None:
    model, texts = await _chat(tmp_path, window=LIMIT)
    answers = [text for text in texts if text.startswith("Answer ")]
    assert len(answers) == MESSAGES
    refused = [r for r in model.requests if r.refused]
    assert len(refused) <= 1
    # after the one refusal at most, every request stays under the limit
    first_ok = next(i for i, r in enumerate(model.requests) if not r.refused)
    assert all(not r.refused for r in model.requests[first_ok:])
    assert max(r.tokens for r in model.requests if not r.refused) <= LIMIT
    assert texts.count(TRIM_NOTICE) == 1
    # the newest message is always sent; the oldest no longer is at the end
    last = model.requests[-1].body["messages"]
    assert last[-1]["content"] == _question(MESSAGES - 1)
    assert all(_question(0) != m.get("content") for m in last)


async def test_a_window_smaller_than_configured_is_learnt_from_one_refusal(
    tmp_path: Path,
) -> None:
    # The config claims twice the window the model has: the first request past the real one
    # is refused, sent again trimmed, and no later request is refused.
    model, texts = await _chat(tmp_path, window=2 * LIMIT, messages=100)
    assert len([text for text in texts if text.startswith("Answer ")]) == 100
    assert len([r for r in model.requests if r.refused]) == 1
    assert texts.count(TRIM_NOTICE) == 1


async def test_compaction_replaces_older_turns_with_a_stored_summary(tmp_path: Path) -> None:
    model, texts = await _chat(tmp_path, window=LIMIT, compaction="summarize", messages=120)
    assert len([text for text in texts if text.startswith("Answer ")]) == 120
    assert not any(r.refused for r in model.requests)
    summaries = [i for i, r in enumerate(model.requests) if r.system == SUMMARY_PROMPT]
    assert summaries, "no summary was asked for"
    # what is summarized is the older conversation, never the message being answered
    first = model.requests[summaries[0]].body["messages"][1]["content"]
    assert _question(0) in first and _question(119) not in first
    # the latest summary is stored, and sent at the head of every later request
    last = summaries[-1] + 1
    stored = f"Summary {last}."
    store = await open_store(f"sqlite:///{tmp_path / 'relaybot.db'}")
    try:
        assert await store.summary("tg", str(CHAT)) == stored
    finally:
        await store.aclose()
    later = model.requests[last:]
    assert later and all(r.system.endswith(f"{SUMMARY_HEADING}\n{stored}") for r in later)
    assert texts.count(TRIM_NOTICE) == 1


async def test_the_notice_comes_again_after_reset(tmp_path: Path) -> None:
    questions = [_question(n) for n in range(50)]
    _, texts = await _chat(tmp_path, window=LIMIT, texts=[*questions, "/reset", *questions])
    assert texts.count(TRIM_NOTICE) == 2
    assert texts.count("Conversation cleared.") == 1
