"""SSEDecoder: the WHATWG event-stream algorithm, fed in every split (architecture §2, cases
C07-C10)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.errors import StreamProtocolError
from providers.sse import MAX_FRAME_BYTES, ServerSentEvent, SSEDecoder, parse_event_json


def decode(*pieces: bytes) -> list[ServerSentEvent]:
    """Feed ``pieces`` in order, then close."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    events.extend(decoder.close())
    return events


def every_split(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(body[:k], body[k:]) for k in range(len(body) + 1)]


def one_byte_reads(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def sse_fixtures(fixtures_dir: Path) -> list[Path]:
    files = sorted(fixtures_dir.glob("*.sse"))
    assert files, f"no .sse fixtures in {fixtures_dir}"
    return files


# -- recorded streams --------------------------------------------------------------------------


def test_every_fixture_decodes_the_same_at_every_split(fixtures_dir: Path) -> None:
    for path in sse_fixtures(fixtures_dir):
        body = path.read_bytes()
        whole = decode(body)
        assert whole, f"{path.name}: no events"
        for head, tail in every_split(body):
            assert decode(head, tail) == whole, f"{path.name} split at {len(head)}"
        assert decode(*one_byte_reads(body)) == whole, path.name


@pytest.mark.parametrize("line_end", [b"\r\n", b"\r"])
def test_every_fixture_decodes_the_same_with_other_line_ends(
    fixtures_dir: Path, line_end: bytes
) -> None:
    for path in sse_fixtures(fixtures_dir):
        body = path.read_bytes()
        converted = body.replace(b"\n", line_end)
        whole = decode(body)
        assert decode(converted) == whole, path.name
        for head, tail in every_split(converted):
            assert decode(head, tail) == whole, f"{path.name} split at {len(head)}"


def test_fixture_events_carry_their_json(fixtures_dir: Path) -> None:
    events = decode((fixtures_dir / "openai_chat_tool_call_chunked.sse").read_bytes())
    assert [e.data for e in events][-1] == "[DONE]"
    assert all(e.event == "message" for e in events)
    first = parse_event_json(events[0].data)
    assert first["choices"][0]["delta"]["content"] == "Let me check the time."


# -- line ends ---------------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["\n", "\r", "\r\n"])
def test_each_line_end_terminates_lines(end: str) -> None:
    body = f"data: a{end}data: b{end}{end}data: c{end}{end}".encode()
    assert [e.data for e in decode(body)] == ["a\nb", "c"]


def test_mixed_line_ends_in_one_body() -> None:
    assert [e.data for e in decode(b"data: a\rdata: b\r\n\ndata: c\n\r")] == ["a\nb", "c"]


def test_cr_at_end_of_one_read_and_lf_at_start_of_next_are_one_line_end() -> None:
    # Were the LF a second line end, it would be a blank line dispatching "a" alone.
    assert [e.data for e in decode(b"data: a\r", b"\ndata: b\r", b"\n\r\n")] == ["a\nb"]


def test_cr_then_lf_after_an_empty_read_is_still_one_line_end() -> None:
    assert [e.data for e in decode(b"data: a\r", b"", b"\n", b"data: b\n\n")] == ["a\nb"]


def test_lone_cr_then_other_text_in_next_read() -> None:
    assert [e.data for e in decode(b"data: a\r", b"data: b\r", b"\r")] == ["a\nb"]


def test_unicode_line_separators_are_not_line_ends() -> None:
    text = "x\u2028y\u0085z\u2029w\x0b\x0cv"
    (event,) = decode(f"data: {text}\n\n".encode())
    assert event.data == text


# -- fields ------------------------------------------------------------------------------------


def test_comments_are_ignored_even_inside_an_event() -> None:
    body = b": OPENROUTER PROCESSING\n\ndata: a\n: keep-alive\ndata: b\n\n:\n\n"
    assert [e.data for e in decode(body)] == ["a\nb"]


def test_c07_comments_and_field_only_events() -> None:
    body = (
        b": OPENROUTER PROCESSING\n\n"
        b'id: 1\ndata: {"choices":[{"delta":{"content":"A"}}]}\n\n'
        b": ping\n\n"
        b"retry: 3000\n\n"
        b'data: {"choices":[{"delta":{"content":"B"}}]}\n\n'
        b"data: [DONE]\n\n"
    )
    events = decode(body)
    assert [e.data for e in events] == [
        '{"choices":[{"delta":{"content":"A"}}]}',
        '{"choices":[{"delta":{"content":"B"}}]}',
        "[DONE]",
    ]
    # the last event id and the retry time persist across events (WHATWG)
    assert [(e.id, e.retry) for e in events] == [("1", None), ("1", 3000), ("1", 3000)]


@pytest.mark.parametrize(
    "block", [b"retry: 3000\n\n", b"event: ping\n\n", b"id: 7\n\n", b"unknown: x\n\n"]
)
def test_events_without_data_are_not_dispatched(block: bytes) -> None:
    assert decode(block) == []


def test_event_type_applies_to_one_event_only() -> None:
    events = decode(b"event: delta\ndata: a\n\ndata: b\n\nevent: ping\n\ndata: c\n\n")
    assert [(e.event, e.data) for e in events] == [
        ("delta", "a"),
        ("message", "b"),
        ("message", "c"),
    ]


def test_c09_multi_line_data_joined_with_lf() -> None:
    body = (
        b"event: response.output_text.delta\n"
        b'data: {"type":"response.output_text.delta",\n'
        b'data:  "delta":"hi"}\n'
        b"\n"
    )
    for head, tail in every_split(body):
        (event,) = decode(head, tail)
        assert event.event == "response.output_text.delta"
        assert event.data == '{"type":"response.output_text.delta",\n "delta":"hi"}'
        assert parse_event_json(event.data)["delta"] == "hi"


def test_field_value_spacing() -> None:
    events = decode(b"data:x\n\ndata:  two\n\ndata\n\ndata:\ndata\n\n")
    assert [e.data for e in events] == ["x", " two", "", "\n"]


def test_id_with_nul_is_ignored_and_bad_retry_is_ignored() -> None:
    (event,) = decode(b"id: 1\nretry: 5\n\nid: a\x00b\nretry: 1.5\ndata: x\n\n")
    assert (event.id, event.retry) == ("1", 5)


# -- BOM -------------------------------------------------------------------------------------


def test_one_leading_bom_is_dropped_in_any_split() -> None:
    body = b"\xef\xbb\xbfdata: x\n\n"
    for head, tail in every_split(body):
        assert [e.data for e in decode(head, tail)] == ["x"]


def test_only_one_bom_is_dropped() -> None:
    # The second BOM becomes part of the field name, so the line is an unknown field.
    assert decode(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []


def test_bom_later_in_the_body_is_data() -> None:
    (event,) = decode(b"data: \xef\xbb\xbfx\n\n")
    assert event.data == "\ufeffx"


# -- end of body -------------------------------------------------------------------------------


def test_close_dispatches_a_terminated_last_event_without_blank_line() -> None:
    assert [e.data for e in decode(b"data: a\n\ndata: b\n")] == ["a", "b"]
    assert [e.data for e in decode(b"data: a\r")] == ["a"]


def test_close_discards_an_unterminated_last_line() -> None:
    assert [e.data for e in decode(b'data: a\n\ndata: {"cut')] == ["a"]


def test_close_discards_the_whole_event_when_its_last_line_is_cut() -> None:
    assert decode(b"data: a\ndata: b") == []


def test_close_after_a_dispatched_event_adds_nothing() -> None:
    decoder = SSEDecoder()
    assert [e.data for e in decoder.feed(b"data: a\n\n")] == ["a"]
    assert decoder.close() == []


# -- UTF-8 -------------------------------------------------------------------------------------


def test_c10_utf8_split_across_reads() -> None:
    body = 'data: {"choices":[{"delta":{"content":"你好 🌍"}}]}\n\n'.encode()
    first_of_ni = body.index("你".encode()) + 1
    emoji_half = body.index("🌍".encode()) + 2
    pieces = (body[:first_of_ni], body[first_of_ni:emoji_half], body[emoji_half:])
    (event,) = decode(*pieces)
    assert parse_event_json(event.data)["choices"][0]["delta"]["content"] == "你好 🌍"
    for head, tail in every_split(body):
        assert decode(head, tail) == [event]
    assert decode(*one_byte_reads(body)) == [event]


def test_invalid_utf8_becomes_replacement_character() -> None:
    (event,) = decode(b"data: a\xffb\n\n")
    assert event.data == "a\ufffdb"


def test_truncated_code_point_at_close_is_replaced_not_raised() -> None:
    assert [e.data for e in decode(b"data: a\n\ndata: \xf0\x9f")] == ["a"]


def test_parse_event_json_rejects_non_json() -> None:
    with pytest.raises(StreamProtocolError):
        parse_event_json('{"type": "response.output_text.delta", "delta": ')
    assert parse_event_json('{"a": 1}') == {"a": 1}


# -- property: any split of any valid body -----------------------------------------------------

_LINE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
)
_NAME = st.text(alphabet="abcdefghij._", min_size=1, max_size=8)
_BLOCK = st.one_of(
    st.tuples(st.just("event"), st.lists(_LINE_TEXT, min_size=1, max_size=3), st.none() | _NAME),
    st.tuples(st.just("comment"), _LINE_TEXT),
    st.tuples(st.just("retry"), st.integers(0, 10**6)),
    st.tuples(st.just("id"), _NAME),
)


@st.composite
def sse_bodies(draw: st.DrawFn) -> tuple[bytes, list[ServerSentEvent]]:
    """A valid event-stream body with random line ends, and the events it must decode to."""
    blocks = draw(st.lists(_BLOCK, max_size=8))
    lines: list[str] = []
    expected: list[ServerSentEvent] = []
    last_id: str | None = None
    retry: int | None = None
    for block in blocks:
        match block:
            case ("event", data_lines, name):
                if name is not None:
                    lines.append(f"event: {name}")
                lines.extend(f"data: {line}" for line in data_lines)
                lines.append("")
                expected.append(
                    ServerSentEvent("\n".join(data_lines), name or "message", last_id, retry)
                )
            case ("comment", text):
                lines.append(f":{text}")
            case ("retry", value):
                lines.extend([f"retry: {value}", ""])
                retry = value
            case ("id", value):
                lines.extend([f"id: {value}", ""])
                last_id = value
    ends = draw(st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=len(lines)))
    text = ""
    previous = ""
    for line, end in zip(lines, ends, strict=False):
        if previous == "\r" and line == "" and end == "\n":
            end = "\r"  # "\r" + "\n" would be read as one CRLF, merging two line ends
        text += line + end
        previous = end
    bom = "\ufeff" if draw(st.booleans()) else ""
    return (bom + text).encode(), expected


@settings(max_examples=300, deadline=None)
@given(sse_bodies(), st.lists(st.integers(min_value=0, max_value=4096), max_size=12))
def test_property_any_split_gives_the_same_events(
    body_and_events: tuple[bytes, list[ServerSentEvent]], cuts: list[int]
) -> None:
    body, expected = body_and_events
    assert decode(body) == expected
    bounds = sorted({min(c, len(body)) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]
    assert decode(*pieces) == expected


@settings(max_examples=300, deadline=None)
@given(sse_bodies(), st.integers(0, 3))
def test_property_reads_of_whole_events_give_the_data_of_every_event(
    body_and_events: tuple[bytes, list[ServerSentEvent]], events_per_read: int
) -> None:
    # A model's stream comes one whole event per read ("data: ...\n\n", maybe after an
    # "event:" line), which feed_data takes without its line loop: reads cut at line ends
    # (every first, second or third LF), so many reads are whole events, some not; or (0)
    # after every blank line, so each read is a whole event or block.
    body, expected = body_and_events
    if events_per_read:
        ends = [i + 1 for i in range(len(body)) if body[i : i + 1] == b"\n"]
        cuts = [end for n, end in enumerate(ends) if n % events_per_read == 0]
    else:
        cuts = [i + 2 for i in range(len(body)) if body[i : i + 2] == b"\n\n"]
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    data = [event.data for event in expected]
    assert decode_data(*pieces) == data
    if not body.startswith("\ufeff".encode()):  # a BOM is dropped only at the start
        assert decode_data(b"data: {}\n\n", *pieces) == ["{}", *data]


_DATA_LINE = st.tuples(
    st.sampled_from(["data:", "data: ", "data:  ", "data", "event: x", ":"]), _LINE_TEXT
)


def decode_data(*pieces: bytes) -> list[str]:
    """:meth:`SSEDecoder.feed_data` over ``pieces`` in order, then ``close_data``."""
    decoder = SSEDecoder()
    data: list[str] = []
    for piece in pieces:
        data.extend(decoder.feed_data(piece))
    data.extend(decoder.close_data())
    return data


@settings(max_examples=300, deadline=None)
@given(
    sse_bodies(),
    st.lists(st.lists(_DATA_LINE, max_size=4), max_size=6),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.lists(st.integers(min_value=0, max_value=4096), max_size=12),
)
def test_property_feed_data_gives_the_data_of_the_events_feed_gives(
    body_and_events: tuple[bytes, list[ServerSentEvent]],
    blocks: list[list[tuple[str, str]]],
    end: str,
    cuts: list[int],
) -> None:
    # every field spelling of data lines (with and without the space, a bare "data", other
    # fields and comments between them), with one line end throughout or the random ones
    spelled = "".join(
        "".join(f"{field}{'' if field == 'data' else text}{end}" for field, text in block) + end
        for block in blocks
    ).encode()
    for body in (body_and_events[0], spelled, body_and_events[0] + spelled):
        bounds = sorted({min(c, len(body)) for c in cuts})
        pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]
        expected = [event.data for event in decode(body)]
        assert decode_data(*pieces) == expected
        assert [event.data for event in decode(*pieces)] == expected


# -- bounds (architecture §2: a line or event larger than 8 MiB is a protocol error)
# ----------------

READ = 64 * 1024


def test_a_line_without_end_is_rejected_at_the_read_that_crosses_8_mib() -> None:
    decoder = SSEDecoder()
    piece = b"x" * READ
    assert decoder.feed(b"data: ") == []
    reads = 0
    with pytest.raises(StreamProtocolError, match="larger than 8388608 bytes"):
        while True:
            decoder.feed(piece)
            reads += 1
    assert reads == MAX_FRAME_BYTES // READ - 1  # 6 + 128 * 64 KiB > 8 MiB: the 128th read
    with pytest.raises(StreamProtocolError):  # failed for good
        decoder.close()


def test_a_long_line_is_held_within_its_bound(fixtures_dir: Path) -> None:
    """Memory stays within the 8 MiB bound plus the reads in flight, however long the line."""
    decoder = SSEDecoder()
    piece = b"y" * READ
    tracemalloc.start()
    try:
        with pytest.raises(StreamProtocolError):
            for _ in range(4 * MAX_FRAME_BYTES // READ):
                decoder.feed(piece)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_FRAME_BYTES + 8 * READ


def test_a_line_of_exactly_8_mib_is_accepted() -> None:
    value = b"z" * (MAX_FRAME_BYTES - len(b"data: "))
    (event,) = decode(b"data: " + value[:1000], value[1000:] + b"\n\n")
    assert len(event.data) == len(value)


def test_events_before_the_overflow_come_first_then_the_error() -> None:
    decoder = SSEDecoder()
    body = b"data: first\n\ndata: " + b"w" * (MAX_FRAME_BYTES + 1)
    assert decoder.feed(body) == [ServerSentEvent("first")]
    with pytest.raises(StreamProtocolError):
        decoder.feed(b"\n\n")


def test_an_event_whose_data_lines_add_up_to_more_than_8_mib_is_rejected() -> None:
    line = b"data: " + b"d" * (MAX_FRAME_BYTES // 4) + b"\n"
    with pytest.raises(StreamProtocolError, match="event's data"):
        decode(line * 5 + b"\n")
    assert len(decode(line * 3 + b"\n")) == 1  # the count restarts after each event
    assert len(decode((line * 3 + b"\n") * 2)) == 2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="ab é🌍", min_size=1, max_size=12), max_size=6),
    st.integers(min_value=65, max_value=200),
    st.lists(st.integers(min_value=0, max_value=600), max_size=10),
)
def test_property_events_before_an_overlong_line_do_not_depend_on_the_split(
    values: list[str], overlong: int, cuts: list[int]
) -> None:
    """With the bound lowered to 64 bytes: the events before a line past it are the same at
    every split of the body, and the line always ends the stream as a protocol error."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("providers.sse.MAX_FRAME_BYTES", 64)
        _events_before_overlong(values, overlong, cuts)


def _events_before_overlong(values: list[str], overlong: int, cuts: list[int]) -> None:
    body = "".join(f"data: {v}\n\n" for v in values).encode() + b"data: " + b"L" * overlong
    bounds = sorted({min(c, len(body)) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    with pytest.raises(StreamProtocolError):
        for piece in pieces:
            events.extend(decoder.feed(piece))
        events.extend(decoder.close())
    assert [e.data for e in events] == values
