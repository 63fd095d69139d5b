"""Streaming invariants of the delivery engine on random scripts, modes, limits and failures.

What the chat must show, defined precisely (architecture §3):

- *Additions*: the splitter closes a code fence at a cut (``"```"``, after a newline) and reopens
  it at the top of the next message (its opening line); a draft's status line and the
  interrupted marker follow the text after a blank line; ``multi_message`` sends the status
  lines, the restart notice and the marker as messages of their own. These are removed before
  comparing.
- ``partial`` and ``off``: the messages, additions removed, concatenate to the full text (all
  rounds, ``"\\n\\n"`` between rounds that showed text), except that trailing whitespace may be
  dropped before the marker.
- ``multi_message``: the messages, additions removed, are the full text's pieces in order with
  only whitespace between them.
- Every state a user could see, additions removed, is a prefix of that (no restart in the run).
- A message whose send timed out has no id: the engine cannot edit it and never does. It may
  show a stale preview; it is left out of the comparison.
"""

from __future__ import annotations

import functools
import itertools
import re
from itertools import pairwise

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from channels.base import ChannelLimits
from orchestrator.delivery.events import (
    AnswerEnded,
    AnswerInterrupted,
    DeliveryEvent,
    Restarted,
    RoundEnded,
    TextEmitted,
    ToolFinished,
    ToolStarted,
)
from orchestrator.delivery.planning import RESTARTED_NOTICE
from orchestrator.delivery.settings import DeliverySettings
from orchestrator.delivery.splitting import scan_fence
from tests.fakes import (
    Fail,
    FakeChat,
    ScriptedDelivery,
    rate_limited,
    renderer,
    timeout,
    write_failed,
)

MARKER = "⚠️ Answer interrupted: x"
_CLOSER = re.compile(r"(`{3,}|~{3,})$")


def html(text: str) -> str:
    return f"<p>{text}</p>"


# -- matching messages against the text ---------------------------------------------------


def matches(messages: list[str], text: str, *, gaps: bool, prefix: bool) -> bool:
    """Whether ``messages`` are ``text`` cut in order (see the module docstring).

    Args:
        gaps: whitespace of ``text`` may lie between messages (``multi_message``).
        prefix: the messages may cover only a prefix of ``text`` (a state mid-stream).
    """

    @functools.cache
    def match(index: int, pos: int, reopened: bool) -> bool:
        if index == len(messages):
            return prefix or not text[pos:].strip()
        starts = [pos]
        if gaps:
            while pos < len(text) and text[pos].isspace():
                pos += 1
                starts.append(pos)
        message = messages[index]
        heads = [message]
        if reopened and "\n" in message:
            heads.append(message.split("\n", 1)[1])
        for head in heads:
            bodies = [(head, False)]
            closer = _CLOSER.search(head)
            if closer:
                bare = head[: closer.start(1)]
                bodies.append((bare, True))
                if bare.endswith("\n"):
                    bodies.append((bare[:-1], True))
            for body, closed in bodies:
                for start in starts:
                    if text.startswith(body, start) and match(index + 1, start + len(body), closed):
                        return True
        return False

    return match(0, 0, False)


def strip_additions(messages: list[str], statuses: set[str], *, own_messages: bool) -> list[str]:
    """Remove status lines, the restart notice and the marker (module docstring)."""
    out: list[str] = []
    for message in messages:
        if own_messages and (message in statuses or message in (RESTARTED_NOTICE, MARKER)):
            continue
        out.append(message)
    if out and not own_messages:
        last = out[-1]
        # The status lines of the running round (one per call), after a blank line.
        head, gap, block = last.rpartition("\n\n")
        if block and all(line in statuses for line in block.split("\n")):
            last = head if gap else ""
        if last.endswith(MARKER):  # the marker, and the blank line before it
            last = last[: -len(MARKER)].rstrip()
            if not last and len(out) > 1:
                out[-2] = out[-2].rstrip()
        out[-1] = last
        if not last:
            out.pop()
    return out


# -- strategies ---------------------------------------------------------------------------

_PARTS = ["a", "b", "cd ", " ", "\n", "\n\n", "```", "```py\n", "😀", "é", "word "]


@st.composite
def scenarios(
    draw: st.DrawFn, modes: tuple[str, ...] = ("partial", "multi_message", "off")
) -> dict:
    mode = draw(st.sampled_from(modes))
    formatting = draw(st.booleans())
    unit = draw(st.sampled_from(["paragraph", "turn"]))
    max_length = draw(st.integers(60, 300))
    limits = ChannelLimits(max_length, draw(st.sampled_from(["utf16", "chars"])))
    delivery = DeliverySettings(
        mode=mode,
        draft_update_interval_ms=draw(st.sampled_from([50, 300, 1000, 2000])),
        multi_message_delay_ms=draw(st.sampled_from([0, 800, 1500])),
        limits=limits,
        multi_message_unit=unit,
        max_edits_per_message=draw(st.one_of(st.none(), st.integers(1, 8))),
        show_tool_status=draw(st.booleans()),
        render=renderer(html, limits.unit) if formatting else None,
    )
    restarts = draw(st.booleans())
    t, tools = 0.0, 0
    script: list[tuple[float, DeliveryEvent]] = []
    for _ in range(draw(st.integers(0, 30))):
        t = round(t + draw(st.floats(0, 2.5)), 2)
        kind = draw(st.sampled_from(["text"] * 6 + ["tool"] + (["restart"] if restarts else [])))
        if kind == "text":
            script.append(
                (
                    t,
                    TextEmitted(
                        "".join(draw(st.lists(st.sampled_from(_PARTS), min_size=1, max_size=6)))
                    ),
                )
            )
        elif kind == "tool":
            tools += 1
            script += [
                (t, RoundEnded()),
                (t, ToolStarted(tools, f"⏳ t{tools}…")),
                (t + 0.5, ToolFinished(tools, f"✓ t{tools} 0.5 s")),
            ]
            t += 0.5
        else:
            script.append((t, Restarted()))
    interrupted = draw(st.booleans())
    script.append(
        (
            round(t + draw(st.floats(0, 3)), 2),
            AnswerInterrupted("x") if interrupted else AnswerEnded(),
        )
    )
    fails = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["send", "edit", "any"]))
        nth = draw(st.integers(1, 12))
        error = draw(st.sampled_from(["rate_limited", "timeout", "failed"]))
        if error == "rate_limited":
            fails.append(Fail(kind, nth, rate_limited(draw(st.sampled_from([0.2, 1.2, 9.0])))))
        elif error == "timeout":
            fails.append(Fail(kind, nth, timeout, lands=kind != "edit" or draw(st.booleans())))
        else:  # only formatted writes fail, so the plain retry gets through
            fails.append(Fail(kind, nth, write_failed, when=lambda k, m, text, fmt: fmt))
    chat_limit = max_length - draw(st.sampled_from([0, 0, 0, 7]))
    return {
        "settings": delivery,
        "script": script,
        "restarts": restarts and any(isinstance(e, Restarted) for _, e in script),
        "interrupted": interrupted,
        "chat": FakeChat(ChannelLimits(chat_limit, limits.unit), fail=fails),
        "latency": draw(st.sampled_from([0.0, 0.05, 0.4])),
        "statuses": {f"{line}" for i in range(1, tools + 1) for line in _lines(i)},
        "formatting": formatting,
    }


def _lines(call: int) -> tuple[str, str]:
    """Call ``call``'s status line while it runs and once it finished."""
    return f"⏳ t{call}…", f"✓ t{call} 0.5 s"


def _running_form(message: str) -> str:
    """A status message as it was sent (multi_message edits it to its finished line)."""
    match = re.fullmatch(r"✓ (t\d+) 0\.5 s", message)
    return f"⏳ {match.group(1)}…" if match else message


def expected_text(script: list[tuple[float, DeliveryEvent]]) -> str:
    """The reply's visible text: rounds joined by a blank line when the earlier ones showed
    text; a restart drops the current round's text."""
    done, current = "", ""
    for _, item in script:
        if isinstance(item, TextEmitted):
            current += item.text
        elif isinstance(item, RoundEnded):
            done = done + "\n\n" + current if done and current else done + current
            current = ""
        elif isinstance(item, Restarted):
            current = ""
    return done + "\n\n" + current if done and current else done + current


# -- the property -------------------------------------------------------------------------


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_streaming_invariants(case: dict) -> None:
    check_invariants(case)


def _landed_timeout_case(
    script: list[tuple[float, DeliveryEvent]],
    statuses: set[str],
    *,
    fail: Fail | None = None,
    max_edits: int = 1,
) -> dict:
    """A reply whose third write, a send, times out but lands, with one edit per message."""
    limits = ChannelLimits(60, "utf16")
    fail = fail or Fail("any", 3, timeout, lands=True)
    kinds = {type(event) for _, event in script}
    return {
        "settings": DeliverySettings(
            mode="partial",
            draft_update_interval_ms=50,
            multi_message_delay_ms=0,
            limits=limits,
            max_edits_per_message=max_edits,
            render=renderer(html, limits.unit),
        ),
        "script": script,
        "restarts": Restarted in kinds,
        "interrupted": AnswerInterrupted in kinds,
        "chat": FakeChat(limits=limits, fail=[fail]),
        "latency": 0.0,
        "statuses": statuses,
        "formatting": True,
    }


def _texts(t: float, *parts: str) -> list[tuple[float, DeliveryEvent]]:
    return [(t, TextEmitted(part)) for part in parts]


def _resent_below_assumed() -> dict:
    # Found by the property below: the first message had used its one edit, so its final
    # (formatted) form was sent anew, below the draft whose send had timed out and landed:
    # its text then showed after that draft's, and twice.
    script = _texts(0.0, *["a"] * 15, "aaaaa", "aaaa", "aaa", *["aaaaaa"] * 4, *["a"] * 5)
    return _landed_timeout_case([*script, (1.0, AnswerEnded())], set())


def _assumed_resent() -> dict:
    # Found by the property below: retiring the first message also re-sent the text of the
    # one assumed landed after it, its status line included.
    script = [
        *_texts(0.0, *["a"] * 9, "aaaaa", "aaaaaa"),
        (0.0, RoundEnded()),
        (0.0, ToolStarted(1, "⏳ t1…")),
        (0.5, ToolFinished(1, "✓ t1 0.5 s")),
        *_texts(0.5, *["aaaaaa"] * 4),
        (0.5, RoundEnded()),
        (0.5, ToolStarted(2, "⏳ t2…")),
        (1.0, ToolFinished(2, "✓ t2 0.5 s")),
        *_texts(1.0, *["a"] * 10),
        (1.0, AnswerEnded()),
    ]
    return _landed_timeout_case(script, {*_lines(1), *_lines(2)})


def _restart_above_assumed() -> dict:
    # Found by the property below: a draft assumed landed held text of an attempt that was
    # then restarted; the new text went to the message above it, so the reply (and its
    # interrupted marker) ended above the failed attempt's text.
    script = [
        *_texts(0.0, *["a"] * 12),
        *_texts(1.0, "a"),
        *_texts(2.0, "a"),
        (2.0, Restarted()),
        *_texts(2.0, *["a"] * 4),
        (2.0, RoundEnded()),
        (2.0, ToolStarted(1, "⏳ t1…")),
        (2.5, ToolFinished(1, "✓ t1 0.5 s")),
        *_texts(2.5, "a", "a"),
        (2.5, AnswerInterrupted("x")),
    ]
    fail = Fail("send", 2, timeout, lands=True)
    return _landed_timeout_case(script, set(_lines(1)), fail=fail, max_edits=3)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios(modes=("partial",)))
@example(_restart_above_assumed())
@example(_resent_below_assumed())
@example(_assumed_resent())
def test_streaming_invariants_of_drafts(case: dict) -> None:
    check_invariants(case)


def check_invariants(case: dict) -> None:
    delivery: DeliverySettings = case["settings"]
    chat: FakeChat = case["chat"]
    run = ScriptedDelivery(delivery, chat=chat, latency=case["latency"])
    run.play(case["script"], limit=10_000)  # it always finishes
    text = run.engine.text
    assert text == expected_text(case["script"])
    mode = delivery.mode
    event(f"mode {mode}")
    event(f"messages: {min(len(chat.messages), 3)}+")
    event(f"rate limited: {run.engine.stats.rate_limited > 0}")
    event(f"given up: {run.engine.stats.writes_given_up > 0}")
    own_messages = mode == "multi_message"

    # Spacing: an interval from one write's completion to the next start (so start to start too);
    # sends in multi_message also by the delay; flood waits honoured.
    # (The chat records when a write started; it completed ``latency`` later.)
    writes = chat.chat_writes()
    for a, b in pairwise(writes):
        assert b.t - a.t >= delivery.interval + case["latency"] - 1e-9
    sends = chat.chat_writes("send")
    for a, b in pairwise(sends):
        assert b.t - a.t >= delivery.send_delay + case["latency"] - 1e-9
    assert chat.early_writes == []

    # No identical edit, except the retry of an edit that timed out (rate-limited and refused
    # attempts changed nothing in between).
    last_outcome: dict[str, str] = {}
    for write in writes:
        if write.outcome == "MessageNotModified":
            assert last_outcome.get(write.message_id or "") == "ChannelTimeout"
        if write.message_id is not None and write.outcome in ("ok", "ChannelTimeout"):
            last_outcome[write.message_id] = write.outcome

    # Every message within the limit: the chat refuses anything longer, so nothing too long
    # was ever shown; the engine only meets "too long" when the platform counts tighter.
    if chat.limits.max_length == delivery.limits.max_length:
        assert not [w for w in writes if w.outcome == "MessageTooLong"]

    # Orphans: drafts whose send timed out before the answer ended. The engine has no id for
    # them: each holds the text it was sent with for good and the reply goes on after it, so
    # it is part of the chat (its status line, if it showed one, removed). After a restart
    # some may show text of the failed attempt: then the chat must match with some set of
    # them left out.
    ended_at = run.fed[-1][1]
    orphans = {
        w.message_id
        for w in chat.writes[:ended_at]
        if w.kind == "send" and w.outcome == "ChannelTimeout"
    }

    def orphan_body(body: str) -> str:
        for status in case["statuses"]:
            if body == status:
                return ""
            if body.endswith("\n\n" + status):
                return body[: -len(status) - 2]
        # A preview leaves a fence open (the next message reopens it): closed here, as the
        # splitter's addition would be.
        fence = scan_fence(body, 0, len(body), None)
        if fence is not None:
            body += ("" if body.endswith("\n") else "\n") + fence.marker
        return body

    def shown(
        snapshot: tuple[tuple[str, str], ...], left: frozenset[str] = frozenset()
    ) -> list[str]:
        if mode != "partial":
            return [body for _, body in snapshot]
        bodies = [
            orphan_body(body) if mid in orphans else body
            for mid, body in snapshot
            if mid not in left
        ]
        return [body for body in bodies if body]

    final = shown(chat.snapshot())
    statuses: set[str] = case["statuses"]

    # The interrupted marker is present iff interrupted (once, last).
    marked = [m for m in final if m == MARKER or m.endswith(MARKER)]
    if case["interrupted"]:
        assert len(marked) == 1 and final and final[-1] == marked[0]
    else:
        assert marked == []

    if case["restarts"] and mode != "partial":
        return  # pieces of a failed attempt stand in the chat: nothing more to compare
    if run.engine.stats.writes_given_up:
        return  # a write given up leaves what it could not change

    # The final chat is the full text.
    bodies = strip_additions(final, statuses, own_messages=own_messages)
    if mode != "multi_message":
        assert all(s not in m for m in bodies for s in statuses)
    if case["restarts"] and orphans:
        variants = [
            strip_additions(shown(chat.snapshot(), frozenset(left)), statuses, own_messages=False)
            for size in range(len(orphans) + 1)
            for left in itertools.combinations(sorted(orphans), size)
        ]
        assert any(matches(v, text, gaps=False, prefix=False) for v in variants), (bodies, text)
    else:
        assert matches(bodies, text, gaps=own_messages, prefix=False), (bodies, text)
    if case["formatting"] and not any(w.outcome != "ok" for w in writes):
        assert all(
            m.formatted
            for m in chat.visible_messages()
            if m.text in final and m.text not in (MARKER, RESTARTED_NOTICE, *statuses)
        )

    # Every state on the way showed a prefix of it: in partial, the text so far; elsewhere
    # messages are never edited, so each state is the start of the final chat.
    if not case["restarts"]:
        for _, snapshot in chat.snapshots:
            if mode != "partial":  # only a status message changes: to its finished line
                earlier = [_running_form(m) for m in shown(snapshot)]
                assert earlier == [_running_form(m) for m in final[: len(snapshot)]]
                continue
            state = strip_additions(shown(snapshot), statuses, own_messages=False)
            assert matches(state, text, gaps=False, prefix=True), (state, text)
