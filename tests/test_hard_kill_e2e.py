"""A hard kill is never invisible (architecture §7 "Store", §9): ``relaybot run`` as a process on
the SQLite store, against the Telegram wire server (tests/peers/telegram.py, getUpdates long
polling) and a Chat Completions server that streams slowly (tests/peers/echo_model.py), is
SIGKILLed while an answer streams — after a draft edit is visible, with two more questions
queued behind it. After a restart the cut message ends with the interrupted marker, the cut
question is not asked again, and each queued question is answered once, in order.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from pathlib import Path

import anyio
import pytest

from orchestrator.chats.shared_queue import TAKEOVER_CAUSE
from orchestrator.delivery.planning import interrupted_marker
from orchestrator.store import Draft, Store
from tests import telegram_harness
from tests.ops_harness import BotProcess
from tests.peers.echo_model import EchoModel, answer_to, slow_answer_to
from tests.peers.telegram import TelegramBotApiServer

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals")

CHAT = 4242


def config_text(peer: TelegramBotApiServer, model: EchoModel) -> str:
    return f"""\
providers:
  main:
    kind: openai_chat
    base_url: "{model.url}/v1"
    api_key: local-test-key
    model: solo
agent:
  providers: [main]
  tools: []
channels:
  tg:
    kind: telegram
    token: "{peer.token}"
    base_url: "{peer.url}/bot"
    stream_mode: partial
    draft_update_interval_ms: 300
    allowed_users: ["*"]
storage:
  path: state/bot.db
server:
  listen: null
"""


def _edits(peer: TelegramBotApiServer) -> int:
    return len(peer.calls_to("editMessageText", CHAT))


async def test_sigkill_mid_answer_then_restart_marks_the_cut_answer_and_answers_the_queue(
    tmp_path: Path,
) -> None:
    slow, queued = "a slow question", ["queued one", "queued two"]
    marker = interrupted_marker(TAKEOVER_CAUSE)
    async with TelegramBotApiServer() as peer, EchoModel(slow_delay_secs=0.3) as model:
        config = tmp_path / "bot.yaml"
        config.write_text(config_text(peer, model))
        async with BotProcess(tmp_path, config) as bot:
            await bot.wait_logged("relaybot running")
            peer.inject_message(CHAT, slow, user_id=CHAT)
            await peer.wait_for(lambda: len(peer.texts(CHAT)) == 1 and _edits(peer) >= 1, 30)
            for text in queued:  # they wait behind the running answer
                peer.inject_message(CHAT, text, user_id=CHAT)
            await peer.wait_for(lambda: _edits(peer) >= 3, 30)  # both taken meanwhile
            await asyncio.sleep(0.5)
            assert [q for _, q in model.asked] == [slow], "nothing else ran in the chat"
            cut = peer.texts(CHAT)[0]
            assert len(cut) < len(slow_answer_to(slow)), "still streaming"
            bot.signal(signal.SIGKILL)
            await bot.finish(within=10)
        assert peer.texts(CHAT) == [cut], "the killed process wrote nothing more"
        with sqlite3.connect(tmp_path / "state" / "bot.db") as db:
            (waiting,) = db.execute("SELECT COUNT(*) FROM waiting").fetchone()
        assert waiting == len(queued), "the queued questions were kept"

        async with BotProcess(tmp_path, config) as bot:
            await bot.wait_logged("relaybot running")

            def recovered() -> bool:
                texts = peer.texts(CHAT)
                return len(texts) == 3 and texts[1:] == [answer_to(q) for q in queued]

            await peer.wait_for(recovered, 30)
            await asyncio.sleep(1.5)  # a second answer, or a re-asked question, would show
            texts = peer.texts(CHAT)
            assert texts[0] == f"{cut}\n\n{marker}", texts[0]
            assert texts[1:] == [answer_to(q) for q in queued]
            assert [q for _, q in model.asked] == [slow, *queued], "each asked once"
            bot.signal(signal.SIGTERM)
            assert await bot.finish(within=45) == 0, bot.err
    with sqlite3.connect(tmp_path / "state" / "bot.db") as db:
        outcomes = [row[0] for row in db.execute("SELECT outcome FROM rounds ORDER BY id")]
        (drafts,) = db.execute("SELECT COUNT(*) FROM drafts").fetchone()
    assert outcomes == ["interrupted", "ok", "ok"]
    assert drafts == 0, "no reply is left in flight"


async def test_a_reply_cut_before_its_first_message_gets_the_marker_as_a_message(
    tmp_path: Path,
) -> None:
    """A kill before the reply's first message landed left only its record: the next start
    sends the marker, answering the user's message, and records the round interrupted."""
    store = Store(tmp_path / "relaybot.db")
    store.set_draft(Draft("tg", str(telegram_harness.CHAT), None, None, "", False, (), None))
    store.close()
    async with telegram_harness.running_bot(tmp_path, []) as bot:
        chat = telegram_harness.CHAT
        store = bot.daemon.store
        with anyio.fail_after(10):
            while store.drafts() or not store.rounds():  # noqa: ASYNC110 - the store is polled
                await anyio.sleep(0.05)
        assert bot.peer.texts(chat) == [interrupted_marker(TAKEOVER_CAUSE)]
        assert [r.outcome for r in store.rounds()] == ["interrupted"]
