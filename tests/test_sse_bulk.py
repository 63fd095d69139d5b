"""The bulk framing of :meth:`SSEDecoder.feed_payloads` (reads without a CR) gives the data the
spec's line loop gives, for reads of many whole events of every form, at any split."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from providers.sse import SSEDecoder

_VALUE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=8
)
_LINE = st.one_of(
    st.builds(lambda v: f"data: {v}", _VALUE),
    st.builds(lambda v: f"data:{v}", _VALUE),
    st.builds(lambda v: f"data:  {v}", _VALUE),
    st.just("data"),
    st.builds(lambda v: f"event: {v}", _VALUE),
    st.builds(lambda v: f"event:{v}", _VALUE),
    st.builds(lambda v: f": {v}", _VALUE),
    st.builds(lambda v: f"id: {v}", _VALUE),
    st.just("retry: 10"),
    st.just("data: event: x"),
    st.just("data: data: y"),
)
_PLAIN = st.one_of(
    st.builds(lambda v: [f"data: {v}"], _VALUE),  # Chat Completions
    st.builds(lambda t, v: [f"event: {t}", f"data: {v}"], _VALUE, _VALUE),  # Anthropic
)
_EVENT = st.one_of(_PLAIN, _PLAIN, st.lists(_LINE, min_size=1, max_size=4))
_GAP = st.sampled_from(["\n", "\n", "\n", "\n\n", "\n\n\n"])


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Events of every form, mostly the plain ones, each ended by one or more blank lines
    (sometimes none: then the next event's lines join it), maybe invalid UTF-8 in a value."""
    text = ""
    for lines in draw(st.lists(_EVENT, max_size=30)):
        text += "\n".join(lines) + "\n" + draw(_GAP)
    body = text.encode()
    if draw(st.booleans()) and b"data: " in body:
        at = body.index(b"data: ") + 6
        body = body[:at] + b"\xff\xe2\x82" + body[at:]
    return body


def line_loop(body: bytes) -> list[str]:
    """The data of every event, by :meth:`SSEDecoder.feed` (the line loop alone)."""
    decoder = SSEDecoder()
    events = decoder.feed(body) + decoder.close()
    return [event.data for event in events]


def payloads(pieces: list[bytes]) -> list[str]:
    decoder = SSEDecoder()
    out = [data for piece in pieces for data in decoder.feed_payloads(piece)]
    out += decoder.close_payloads()
    return [data.decode("utf-8", "replace") for data in out]


@settings(max_examples=500, deadline=None)
@given(bodies(), st.lists(st.integers(min_value=0, max_value=2000), max_size=6))
def test_property_bulk_framing_gives_the_data_of_the_line_loop(
    body: bytes, cuts: list[int]
) -> None:
    warm_up = b"data: first\n\n"  # the BOM looked for: every later read may be framed in bulk
    whole = warm_up + body
    expected = line_loop(whole)
    bounds = sorted({min(c, len(body)) + len(warm_up) for c in cuts} | {len(warm_up)})
    pieces = [whole[a:b] for a, b in zip([0, *bounds], [*bounds, len(whole)], strict=True)]
    assert payloads(pieces) == expected
    assert payloads([warm_up, body]) == expected


def test_a_read_of_plain_events_is_sliced_as_sent() -> None:
    decoder = SSEDecoder()
    decoder.feed_payloads(b": open\n\n")
    chat = b"".join(b"data: {%d}\n\n" % i for i in range(5))
    typed = b"".join(b"event: delta\ndata: {%d}\n\n" % i for i in range(5))
    expected = [b"{%d}" % i for i in range(5)]
    assert decoder.feed_payloads(chat + typed + b"data: {5") == expected + expected
    assert decoder.feed_payloads(b"}\n\n") == [b"{5}"]


def test_an_event_of_another_form_between_plain_ones_takes_the_line_loop() -> None:
    decoder = SSEDecoder()
    decoder.feed_payloads(b": open\n\n")
    odd = b"event: a\ndata:z\ndata: y\n\nevent: b\nid: 7\ndata: w\n\n"
    body = b"event: d\ndata: 1\n\n" + odd + b"event: d\ndata: 2\n\ndata: 3\ndata:4\n\ndata: 5\n\n"
    assert decoder.feed_payloads(body) == [b"1", b"z\ny", b"w", b"2", b"3\n4", b"5"]
