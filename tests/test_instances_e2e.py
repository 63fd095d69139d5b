"""Three ``relaybot run`` processes in Telegram webhook mode on one PostgreSQL store
(architecture §9): the Telegram peer POSTs each update twice, to two different instances,
round-robin. Every question is answered exactly once, in each chat's order, with 20 chats at
once; an instance SIGKILLed mid-answer leaves its queued messages to the others and its cut
answer is marked interrupted."""

from __future__ import annotations

from pathlib import Path

import anyio

from orchestrator.chats.shared_queue import TAKEOVER_CAUSE
from orchestrator.delivery.planning import interrupted_marker
from orchestrator.turn.runner import STOPPED_MARKER
from tests.instances import Fleet
from tests.peers.echo_model import EchoModel, answer_to, slow_answer_to
from tests.peers.telegram import TelegramBotApiServer

CHATS = 20
QUESTIONS = 3


async def _wait(predicate: object, within: float, what: str) -> None:
    assert callable(predicate)
    with anyio.move_on_after(within):
        while not predicate():  # noqa: ASYNC110 - the chats and the model are polled
            await anyio.sleep(0.1)
        return
    raise AssertionError(f"not within {within} s: {what}")


async def test_three_instances_answer_each_question_once_in_order(
    tmp_path: Path, postgres_url: str
) -> None:
    chats = [1000 + i for i in range(CHATS)]
    questions = {chat: [f"chat {chat} question {n}" for n in range(QUESTIONS)] for chat in chats}
    expected = {chat: [answer_to(q) for q in questions[chat]] for chat in chats}
    async with (
        TelegramBotApiServer() as peer,
        EchoModel(delay_secs=0.05) as model,
        Fleet(tmp_path, peer, model, postgres_url, 3) as fleet,
    ):
        for n in range(QUESTIONS):
            for chat in chats:  # the next question arrives while the last one is answered
                peer.inject_message(chat, questions[chat][n], user_id=chat)
            await anyio.sleep(0.2)

        def answered() -> bool:
            return all(peer.texts(chat) == expected[chat] for chat in chats)

        await _wait(answered, 120, "every chat's answers, in order")
        await anyio.sleep(1.0)  # a duplicate answer would show by now
        assert all(peer.texts(chat) == expected[chat] for chat in chats)
        asked = [question for _, question in model.asked]
        assert sorted(asked) == sorted(q for chat in chats for q in questions[chat])
        answering = {model_name for model_name, _ in model.asked}
        assert len(answering) > 1, "the load was shared"
        assert all(p.poll() is None for p in fleet.processes)


async def test_a_killed_instance_leaves_its_queue_and_cut_answer_to_the_others(
    tmp_path: Path, postgres_url: str
) -> None:
    chat = 77
    slow, after = "a slow question", ["queued one", "queued two"]
    async with (
        TelegramBotApiServer() as peer,
        EchoModel(slow_delay_secs=0.3) as model,
        Fleet(tmp_path, peer, model, postgres_url, 3, takeover_secs=2.0) as fleet,
    ):
        peer.inject_message(chat, slow, user_id=chat)
        await _wait(lambda: len(peer.texts(chat)) == 1, 30, "the slow answer's first draft")
        victim = fleet.instance_of(slow)
        assert victim is not None
        for text in after:  # queued in the store behind the running answer
            peer.inject_message(chat, text, user_id=chat)
        await _wait(lambda: peer.calls_to("sendMessage") and len(peer.updates) == 3, 10, "")
        await anyio.sleep(1.0)  # both delivered and stored while the answer runs
        assert [q for _, q in model.asked] == [slow], "nothing else ran in the chat"
        cut = peer.texts(chat)[0]
        fleet.kill(victim)
        marker = interrupted_marker(TAKEOVER_CAUSE)

        def recovered() -> bool:
            texts = peer.texts(chat)
            return len(texts) == 3 and texts[1:] == [answer_to(t) for t in after]

        await _wait(recovered, 30, "the queued messages answered by the others")
        first = peer.texts(chat)[0]
        assert first.endswith(marker), first
        assert first.startswith(cut) and len(first) < len(slow_answer_to(slow)), "it was cut"
        survivors = {int(m.removeprefix("inst-")) for m, q in model.asked if q in after}
        assert victim not in survivors and survivors


async def test_stop_at_any_instance_stops_the_answer_running_at_another(
    tmp_path: Path, postgres_url: str
) -> None:
    chat = 88
    async with (
        TelegramBotApiServer() as peer,
        EchoModel(slow_delay_secs=0.3) as model,
        Fleet(tmp_path, peer, model, postgres_url, 3) as fleet,
    ):
        peer.inject_message(chat, "a slow one", user_id=chat)
        await _wait(lambda: len(peer.texts(chat)) == 1, 30, "the slow answer's first draft")
        answering = fleet.instance_of("a slow one")
        assert answering is not None
        other = (answering + 1) % 3  # /stop reaches only an instance that is not answering
        peer.webhook_targets = [peer.webhook_targets[other]]
        peer.webhook_copies = 1
        peer.inject_message(chat, "/stop", user_id=chat)
        await _wait(lambda: peer.texts(chat)[0].endswith(STOPPED_MARKER), 15, "the stop marker")
        await anyio.sleep(1.0)
        assert peer.texts(chat)[1:] == [], "no 'Nothing to stop.' from another instance"
        assert len(model.asked) == 1
