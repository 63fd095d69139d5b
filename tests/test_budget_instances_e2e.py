"""One budget across two ``relaybot run`` processes on one PostgreSQL store (architecture §5
"Budgets", §9): the Telegram peer delivers the updates to the two instances in turn, each answer
reports 11 + 5 tokens, and the user's ``tokens_per_day`` of 20 lets two answers through — one
from each instance — and refuses the third, whichever instance takes it, without asking the
model. The store holds each round's usage once.

The first two questions are asked in two forum topics of the user's chat, two conversations:
a message that reaches one instance while another holds its conversation is answered by the
holder (§9), and the holder releases the conversation only after its answer is visible, so in
one conversation which instance answered the second question would depend on timing (under
load the first instance still held it and answered both). The third is asked in the second's
topic, so it is checked against the budget only after the second's usage is stored."""

from __future__ import annotations

from pathlib import Path

import anyio

from orchestrator.store import open_store
from tests.instances import Fleet
from tests.peers.echo_model import EchoModel, answer_to
from tests.peers.telegram import TelegramBotApiServer

CHAT = 4242
FIRST_TOPIC, SECOND_TOPIC = 1, 2
LIMITS = """\
limits:
  user:
    tokens_per_day: 20
"""


class BudgetFleet(Fleet):
    """The instances of :class:`Fleet` with :data:`LIMITS`."""

    def config(self, index: int) -> str:
        return LIMITS + super().config(index)


async def _texts(peer: TelegramBotApiServer, count: int) -> list[str]:
    with anyio.fail_after(60):
        while len(peer.texts(CHAT)) < count:  # noqa: ASYNC110 - the chat is polled
            await anyio.sleep(0.05)
    return peer.texts(CHAT)


async def test_two_instances_count_one_budget_once(tmp_path: Path, postgres_url: str) -> None:
    async with (
        TelegramBotApiServer() as peer,
        EchoModel(delay_secs=0.01, usage=(11, 5)) as model,
        BudgetFleet(tmp_path, peer, model, postgres_url, 2, copies=1) as fleet,
    ):
        for n, (question, topic) in enumerate([("first", FIRST_TOPIC), ("second", SECOND_TOPIC)]):
            peer.inject_message(CHAT, question, user_id=CHAT, topic_id=topic)
            assert (await _texts(peer, n + 1))[-1] == answer_to(question)
        assert {fleet.instance_of("first"), fleet.instance_of("second")} == {0, 1}
        peer.inject_message(CHAT, "third", user_id=CHAT, topic_id=SECOND_TOPIC)
        refusal = (await _texts(peer, 3))[-1]
        assert refusal.startswith("⛔ Your daily token limit (20) is used up: it resets in")
        assert [question for _, question in model.asked] == ["first", "second"]
    store = await open_store(postgres_url)
    try:
        rows = await store.controls.usage_rows(0)
    finally:
        await store.aclose()
    assert [(r.user_id, r.input_tokens, r.output_tokens, r.estimated) for r in rows] == [
        (str(CHAT), 11, 5, False),
        (str(CHAT), 11, 5, False),
    ]
