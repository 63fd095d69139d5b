"""Access control (architecture §3 "Access"): ids and verified handles, never display names."""

from __future__ import annotations

from channels.base import InboundMessage
from orchestrator.chats.access import AccessControl


def msg(
    sender_id: str,
    name: str,
    *,
    direct: bool = True,
    mention: bool = False,
    handle: str | None = None,
) -> InboundMessage:
    return InboundMessage(
        "tg",
        "c",
        sender_id,
        name,
        "hi",
        "1",
        is_direct=direct,
        mentions_bot=mention,
        sender_handle=handle,
    )


def test_ids_and_verified_handles_are_allowed() -> None:
    access = AccessControl("tg", ["@alice", 999], "mention")
    assert access.allows(msg("999", "Somebody"))
    assert access.allows(msg("5", "@Alice", handle="Alice"))


def test_display_names_never_pass_for_a_handle_or_an_id() -> None:
    access = AccessControl("tg", ["alice", "999"], "mention")
    assert not access.allows(msg("5", "alice"))  # a first name, not the handle @alice
    assert not access.allows(msg("6", "999"))  # a first name, not the id 999
    assert access.allows(msg("7", "@alice", handle="alice"))


def test_a_display_name_starting_with_at_is_still_a_display_name() -> None:
    access = AccessControl("tg", ["alice", "@bob"], "mention")
    assert not access.allows(msg("8", "@alice"))  # no verified handle: a name the user chose
    assert not access.allows(msg("9", "@bob", handle=None))
    assert not access.allows(msg("10", "@alice", handle="mallory"))
    assert access.allows(msg("11", "Bob B.", handle="bob"))


def test_empty_means_nobody_and_star_means_everyone() -> None:
    assert not AccessControl("tg", [], "mention").allows(msg("1", "@a"))
    assert AccessControl("tg", ["*"], "mention").allows(msg("1", "x"))


def test_groups_need_a_mention_unless_all() -> None:
    assert not AccessControl("tg", ["*"], "mention").allows(msg("1", "x", direct=False))
    assert AccessControl("tg", ["*"], "mention").allows(msg("1", "x", direct=False, mention=True))
    assert AccessControl("tg", ["*"], "all").allows(msg("1", "x", direct=False))
