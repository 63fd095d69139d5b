"""``relaybot run`` as a process with a hook that holds the GIL in one chat (issue #28;
architecture §4 "The hook"): the other chat streams on at its spacing, the hook is killed at its
timeout and its piece withheld, the chat answers again afterwards, and no worker process outlives
the bot. Real process, real sockets (the Telegram and provider peers run in this test's loop).
"""

from __future__ import annotations

import signal
from itertools import pairwise
from pathlib import Path

from tests.ops_harness import BotProcess
from tests.peers.provider_server import ProviderServer
from tests.peers.telegram import TelegramBotApiServer
from tests.telegram_harness import PATH, pieces_of, reply, text_stream, words
from tests.test_hook_workers import alive

CHAT_A = 111
CHAT_B = 222
INTERVAL_MS = 300
HOOK_TIMEOUT_SECS = 1.5
CATASTROPHIC = "a" * 28 + "!"  # BACKTRACKING on it: one GIL-holding C call of many seconds
WITHHELD = "⚠️ Part of this answer was withheld."


def _config(peer: TelegramBotApiServer, provider: ProviderServer, tmp_path: Path) -> str:
    return f"""\
policy:
  on_message_sending: "tests.policy_hooks:backtrack"
  hook_timeout_secs: {HOOK_TIMEOUT_SECS}
providers:
  main:
    kind: openai_chat
    base_url: "{provider.url}/v1"
    api_key: local-test-key
    model: m
agent:
  providers: [main]
channels:
  tg:
    kind: telegram
    token: "{peer.token}"
    base_url: "{peer.base_url}"
    stream_mode: partial
    draft_update_interval_ms: {INTERVAL_MS}
    allowed_users: ["*"]
storage:
  path: "{tmp_path / "relaybot.db"}"
server:
  listen: null
"""


def _children(pid: int) -> list[int]:
    """The process ids whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


async def test_a_gil_holding_hook_in_one_chat_leaves_the_other_chat_its_spacing(
    tmp_path: Path,
) -> None:
    """Chat A's answer is a word the hook's pattern backtracks on for many seconds. Meanwhile
    chat B streams a long answer: its edits stay within two draft intervals of each other
    while A's hook runs (in a thread of the bot the loop froze: B's gap was the whole search).
    A's hook is killed at 1.5 s and A's piece withheld; a later answer in A comes through."""
    long_b = words("bee", 3000)
    replies = [
        reply(text_stream([CATASTROPHIC]), delay_secs=0.05),
        reply(text_stream(pieces_of(long_b, 25)), delay_secs=0.05),  # ~6 s of streaming
        reply(text_stream(pieces_of("All fine now", 4)), delay_secs=0.02),
    ]
    async with TelegramBotApiServer() as peer, ProviderServer() as provider:
        peer.open_chat(CHAT_A)
        provider.script(PATH, replies)
        config = tmp_path / "bot.yaml"
        config.write_text(_config(peer, provider, tmp_path))
        async with BotProcess(tmp_path, config) as bot:
            await bot.wait_logged("relaybot running")
            assert bot.process is not None
            workers = _children(bot.process.pid)
            assert len(workers) == 2  # policy.hook_workers' default
            await peer.wait_for(lambda: bool(peer.calls_to("getUpdates")), 30)
            peer.inject_message(CHAT_A, "first")
            await bot.wait_for(lambda: len(provider.requests_to(PATH)) == 1)
            peer.inject_message(CHAT_B, "second", user_id=222, username="bob")
            await bot.wait_for(lambda: peer.texts(CHAT_A) == [WITHHELD], 40)
            await bot.wait_for(lambda: peer.texts(CHAT_B) == [long_b], 40)
            peer.inject_message(CHAT_A, "again")
            await bot.wait_for(lambda: len(peer.texts(CHAT_A)) == 2, 30)
            workers += _children(bot.process.pid)
            bot.signal(signal.SIGTERM)
            code = await bot.finish()
    assert code == 0, bot.err
    assert peer.texts(CHAT_A) == [WITHHELD, "All fine now"]
    assert f"did not answer within {HOOK_TIMEOUT_SECS:g} s in tg:{CHAT_A}" in bot.err
    assert "Traceback" not in bot.err

    # A's hook: from the end of A's answer to the withheld notice (A's only write: the answer
    # is shorter than the redaction holdback).
    [notice] = [c for c in peer.calls_to("sendMessage", CHAT_A) if c.params["text"] == WITHHELD]
    hook_end = notice.at
    hook_start = hook_end - HOOK_TIMEOUT_SECS
    writes_b = [
        c
        for c in peer.calls
        if c.chat_id == CHAT_B and c.method in ("sendMessage", "editMessageText")
    ]
    interval = INTERVAL_MS / 1000
    around = [c for c in writes_b if hook_start - interval <= c.at <= hook_end + interval]
    assert len([c for c in around if hook_start <= c.at <= hook_end]) >= 2, (
        "chat B streamed while chat A's hook ran"
    )
    gaps = [round(b.at - a.at, 3) for a, b in pairwise(around)]
    assert max(gaps) <= 2 * interval, gaps

    # No worker outlives the bot: neither the killed one nor any other.
    assert not any(alive(pid) for pid in workers)
