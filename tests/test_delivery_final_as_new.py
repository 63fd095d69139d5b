"""``final_as_new_message`` in ``partial`` mode (Matrix ``notice_previews``, architecture §3
"Matrix specifics"), scripted on a fake clock: the final text goes out as new messages, the
drafts are deleted only after every final message landed, and a final send that fails keeps the
last preview (case C17).
"""

from __future__ import annotations

from channels.base import ChannelLimits
from orchestrator.delivery.events import AnswerEnded, AnswerRefused, TextEmitted
from orchestrator.delivery.settings import DeliverySettings
from tests.fakes import Fail, FakeChat, ScriptedDelivery, renderer, write_failed


def html(text: str) -> str:
    return f"<p>{text}</p>"


NOTICES = DeliverySettings(
    mode="partial",
    draft_update_interval_ms=1000,
    limits=ChannelLimits(4000, "chars"),
    max_edits_per_message=100,
    final_as_new_message=True,
    render=renderer(html),
)


def _writes(run: ScriptedDelivery) -> list[tuple[str, str, bool]]:
    return [(w.kind, w.text, w.formatted) for w in run.chat.chat_writes()]


def test_the_final_text_is_a_new_message_and_the_draft_is_deleted_after_it() -> None:
    run = ScriptedDelivery(NOTICES)
    run.play(
        [
            (0.0, TextEmitted("Hel")),
            (0.3, TextEmitted("lo")),
            (1.5, TextEmitted("!")),
            (1.9, AnswerEnded()),
        ]
    )
    writes = run.chat.chat_writes()
    draft = writes[0].message_id
    assert _writes(run) == [
        ("send", "Hel", False),
        ("edit", "Hello", False),
        ("send", "Hello!", True),
        ("delete", "", False),
    ]
    assert writes[-1].message_id == draft
    assert run.chat.visible() == ["Hello!"]
    assert run.engine.finished
    assert run.engine.stats.edits_sent == 1


def test_a_long_answer_sends_every_part_anew_before_any_draft_is_deleted() -> None:
    settings = DeliverySettings(
        mode="partial",
        limits=ChannelLimits(200, "chars"),
        final_as_new_message=True,
        render=renderer(html),
    )
    text = " ".join(f"word{n}" for n in range(80))  # about 500 characters: three messages
    run = ScriptedDelivery(settings)
    run.play(
        [
            *[(i * 0.5, TextEmitted(text[o : o + 40])) for i, o in enumerate(range(0, 480, 40))],
            (6.5, TextEmitted(text[480:])),
            (8.0, AnswerEnded()),
        ]
    )
    writes = run.chat.chat_writes()
    end = next(i for i, w in enumerate(writes) if w.formatted)
    finals = [w for w in writes[end:] if w.kind == "send"]
    deletes = [w for w in writes[end:] if w.kind == "delete"]
    assert [w.kind for w in writes[end:]] == ["send"] * len(finals) + ["delete"] * len(deletes)
    drafts = {w.message_id for w in writes[:end] if w.kind == "send"}
    assert len(drafts) >= 2
    assert {w.message_id for w in deletes} == drafts
    assert " ".join(m.text for m in run.chat.visible_messages()).split() == text.split()
    assert all(m.formatted for m in run.chat.visible_messages())


def test_c17_a_final_send_that_fails_keeps_the_last_preview() -> None:
    """The final send is rejected formatted and then plain: the draft, showing the last
    preview, is never deleted."""
    after_end = Fail("send", None, write_failed, when=lambda k, m, t, f: t == "Hello!", times=2)
    chat = FakeChat(NOTICES.limits, fail=[after_end])
    run = ScriptedDelivery(NOTICES, chat=chat)
    run.play(
        [
            (0.0, TextEmitted("Hel")),
            (0.3, TextEmitted("lo")),
            (1.9, TextEmitted("!")),
            (2.0, AnswerEnded()),
        ]
    )
    writes = chat.chat_writes()
    assert [(w.kind, w.formatted, w.outcome) for w in writes[-2:]] == [
        ("send", True, "ChannelWriteFailed"),
        ("send", False, "ChannelWriteFailed"),
    ]
    previews = [w for w in writes[:-2] if w.outcome == "ok"]
    assert previews and not any(w.formatted for w in previews)
    assert chat.visible() == [previews[-1].text]
    assert chat.chat_writes("delete") == []
    assert run.engine.finished
    assert run.engine.stats.writes_given_up == 1


def test_a_refusal_is_a_new_message_and_the_draft_goes() -> None:
    run = ScriptedDelivery(NOTICES)
    run.play([(0.0, TextEmitted("Some text")), (2.0, AnswerRefused("I can't help with that."))])
    assert [(w.kind, w.text) for w in run.chat.chat_writes()] == [
        ("send", "Some text"),
        ("send", "I can't help with that."),
        ("delete", ""),
    ]
    assert run.chat.visible() == ["I can't help with that."]
