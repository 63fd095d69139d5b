"""Matrix end to end (issue 12; architecture §3 "Matrix specifics"): the real daemon, a real Synapse
homeserver, the human a second matrix-nio client, the provider a local Chat Completions server.

Real sockets, real time: intervals are scaled down (200 ms instead of Matrix's 1500 ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from channels.matrix.format import HTML_FORMAT, markdown_to_html
from tests.matrix_harness import matrix_world, running_bot
from tests.peers.matrix_client import resolve_edits, thread_root
from tests.peers.synapse import SynapseHomeserver
from tests.telegram_harness import pieces_of, reply, text_stream, words

ANSWER = "It is **morning** in UTC right now. " + words("w", 400)


def _edits(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e for e in events if e["content"].get("m.relates_to", {}).get("rel_type") == "m.replace"
    ]


def _originals(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e for e in events if e["content"].get("m.relates_to", {}).get("rel_type") != "m.replace"
    ]


async def test_partial_streams_as_edits_and_resolves_to_the_formatted_answer(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    stream = reply(text_stream(pieces_of(ANSWER, 20)), delay_secs=0.1)  # about 2 s of deltas
    async with matrix_world(synapse, tmp_path, [stream]) as world:
        async with running_bot(world, mode="partial"):
            await world.ask("what time is it?")
        events = await world.bot_events()
    originals, edits = _originals(events), _edits(events)
    assert len(originals) == 1
    assert len(edits) >= 2, "the reply did not stream as edits"
    first = originals[0]
    for edit in edits:
        content = edit["content"]
        assert content["m.relates_to"] == {"rel_type": "m.replace", "event_id": first["event_id"]}
        new = content["m.new_content"]
        assert {"body", "format", "formatted_body"} <= set(new)
        assert content["body"] == "* " + new["body"]
    shown = resolve_edits(events)[first["event_id"]]
    assert shown["body"] == ANSWER
    assert shown["format"] == HTML_FORMAT
    assert shown["formatted_body"] == markdown_to_html(ANSWER)
    assert "<strong>morning</strong>" in shown["formatted_body"]
    # The final edit is the last: nothing edits the message after the formatted text.
    assert edits[-1]["content"]["m.new_content"]["body"] == ANSWER


async def test_a_thread_message_is_answered_in_its_thread(
    synapse: SynapseHomeserver, tmp_path: Path
) -> None:
    stream = reply(text_stream(["In the ", "thread."]))
    async with matrix_world(synapse, tmp_path, [stream]) as world:
        root = await world.send({"msgtype": "m.text", "body": "a topic"})
        async with running_bot(world, mode="partial"):
            await world.ask(
                "and a question",
                **{"m.relates_to": {"rel_type": "m.thread", "event_id": root}},
            )
        events = await world.bot_events()
    originals = _originals(events)
    assert [e["content"]["body"] for e in originals] == ["In the thread."]
    assert thread_root(originals[0]) == root
