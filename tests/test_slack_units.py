"""The Slack channel's pure parts: native-stream steps (appends concatenate to the text, a
failed step repeats nothing), the inbound reader, the slash commands, mrkdwn and the config's
checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from channels.base import COMMAND_MENU
from channels.slack.commands import chat_command, manifest_commands, readme_table
from channels.slack.controls import APPROVE, DENY, SECTION_MAX, approval_blocks
from channels.slack.format import escape, mrkdwn, rendering
from channels.slack.inbound import InboundReader, update_id
from channels.slack.kind import SLACK_MAX_STREAM_TEXT, SlackChannelConfig
from channels.slack.stream import (
    Append,
    Close,
    Stop,
    Stream,
    Unchanged,
    Update,
    next_step,
)

BOT = "U0BOT0001"


@given(
    st.lists(st.text(min_size=0, max_size=20), min_size=1, max_size=30),
    st.lists(st.booleans(), min_size=30, max_size=30),
)
def test_appends_concatenate_to_the_final_text_whatever_fails(
    deltas: list[str], failures: list[bool]
) -> None:
    """The engine edits with the whole text so far; a failed step (a 429) changes nothing and
    the next edit carries the newest text: what Slack got is the text, once."""
    stream = Stream(shown="start ")
    received = ["start "]
    text = "start "
    for delta, failed in zip(deltas, failures, strict=False):
        text += delta
        step = next_step(stream, text, formatted=False)
        if isinstance(step, Append) and not failed:
            received.append(step.delta)
            stream.shown = text
        else:
            assert isinstance(step, Unchanged | Append)
    final = next_step(stream, text, formatted=True)
    assert isinstance(final, Stop)
    received.append(final.delta or "")
    assert "".join(received) == text


def test_a_text_that_no_longer_extends_the_stream_closes_it() -> None:
    stream = Stream(shown="Hello wor")
    assert next_step(stream, "Hello", formatted=False) == Close()
    assert next_step(stream, "Hello wor" + "x" * (SLACK_MAX_STREAM_TEXT + 1), formatted=False) == (
        Close()
    )
    assert next_step(stream, "Hello world", formatted=False) == Append("ld")
    assert next_step(stream, "Hello wor", formatted=True) == Stop(None)
    stream.open = False
    assert next_step(stream, "Hello world", formatted=False) == Update()


def test_the_reader_answers_a_message_once_and_strips_the_mention() -> None:
    reader = InboundReader("sl", BOT, "T1")
    event = {"type": "message", "channel": "C1", "user": "U1", "ts": "10.1",
             "text": f"<@{BOT}> is 1 &lt; 2?", "channel_type": "channel"}  # fmt: skip
    message = reader.event(event)
    assert message is not None
    assert (message.text, message.mentions_bot, message.is_direct) == ("is 1 < 2?", True, False)
    assert message.thread_id == "10.1" and message.update_ids == (update_id("C1", "10.1"),)
    assert reader.event({**event, "type": "app_mention"}) is None  # the same message again
    assert reader.asker("C1", "10.1") is not None
    reply = reader.event({**event, "ts": "10.2", "thread_ts": "10.1", "text": "more"})
    assert reply is not None and reply.thread_id == "10.1" and not reply.mentions_bot
    assert reader.event({**event, "ts": "10.3", "subtype": "message_changed"}) is None
    assert reader.event({**event, "ts": "10.4", "user": BOT}) is None
    command = reader.command({"channel_id": "C1", "user_id": "U1", "command": "/reset"})
    assert command.text == "/reset" and command.thread_id == "10.1"


def test_a_long_prompt_is_clipped_to_one_section() -> None:
    blocks = approval_blocks("x" * 5000, "t")
    assert len(blocks[0]["text"]["text"]) == SECTION_MAX
    assert [e["action_id"] for e in blocks[1]["elements"]] == [APPROVE, DENY]


def test_mrkdwn_and_plain_text() -> None:
    assert escape("a < b & c > d") == "a &lt; b &amp; c &gt; d"
    assert mrkdwn("**bold** [x](https://e.org)") == "*bold* <https://e.org|x>"
    assert rendering("**b**").length == len("*b*")


def test_the_config_wants_slack_ids_and_one_transport() -> None:
    base = {"kind": "slack", "bot_token": "xoxb-1"}
    SlackChannelConfig.model_validate({**base, "app_token": "xapp-1", "allowed_users": ["U1", "*"]})
    with pytest.raises(ValidationError, match="Slack user id"):
        SlackChannelConfig.model_validate({**base, "app_token": "xapp-1", "allowed_users": ["bob"]})
    with pytest.raises(ValidationError, match="not both"):
        SlackChannelConfig.model_validate({**base})
    with pytest.raises(ValidationError, match="required with signing_secret"):
        SlackChannelConfig.model_validate({**base, "signing_secret": "s"})


def test_every_menu_command_is_a_slash_command_and_the_readme_lists_them() -> None:
    declared = [entry["command"] for entry in manifest_commands()]
    assert [chat_command(command) for command in declared] == [
        f"/{name}" for name, _, _ in COMMAND_MENU
    ]
    assert "/status" not in declared  # Slack's own
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- slack-commands:start -->\n")[1].split("\n<!-- slack-commands:end")[0]
    assert table == readme_table()


def test_a_prefixed_slash_command_is_the_menu_command() -> None:
    assert chat_command("/gpt-model", " smart ") == "/model smart"
    assert chat_command("/system", "be brief") == "/system be brief"
    assert chat_command("/my-own") == "/my-own"  # not in the menu: as it is
