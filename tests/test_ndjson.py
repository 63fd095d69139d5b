"""NDJSONDecoder: complete lines out of any split of the body (architecture §2)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.bounded_json import MAX_FRAME_BYTES
from providers.errors import StreamProtocolError
from providers.ndjson import NDJSONDecoder


def decode(*pieces: bytes) -> list[str]:
    decoder = NDJSONDecoder()
    lines: list[str] = []
    for piece in pieces:
        lines.extend(decoder.feed(piece))
    lines.extend(decoder.close())
    return lines


def ndjson_fixtures(fixtures_dir: Path) -> list[Path]:
    files = sorted(fixtures_dir.glob("*.ndjson"))
    assert files, f"no .ndjson fixtures in {fixtures_dir}"
    return files


def test_every_fixture_decodes_the_same_at_every_split(fixtures_dir: Path) -> None:
    for path in ndjson_fixtures(fixtures_dir):
        body = path.read_bytes()
        whole = decode(body)
        assert whole == [line for line in body.decode().split("\n") if line], path.name
        assert all(isinstance(json.loads(line), dict) for line in whole), path.name
        for k in range(len(body) + 1):
            assert decode(body[:k], body[k:]) == whole, f"{path.name} split at {k}"
        assert decode(*(body[i : i + 1] for i in range(len(body)))) == whole, path.name


def test_every_fixture_decodes_the_same_with_crlf(fixtures_dir: Path) -> None:
    for path in ndjson_fixtures(fixtures_dir):
        body = path.read_bytes()
        crlf = body.replace(b"\n", b"\r\n")
        for k in range(len(crlf) + 1):
            assert decode(crlf[:k], crlf[k:]) == decode(body), f"{path.name} split at {k}"


def test_lines_are_returned_as_soon_as_terminated() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a":1}\n{"b"') == ['{"a":1}']
    assert decoder.feed(b":2}") == []
    assert decoder.feed(b"\n") == ['{"b":2}']
    assert decoder.close() == []


def test_blank_lines_are_skipped() -> None:
    assert decode(b'\n{"a":1}\n\n  \r\n{"b":2}\n\n') == ['{"a":1}', '{"b":2}']


def test_close_returns_the_unterminated_last_line() -> None:
    assert decode(b'{"a":1}\n{"done":true}') == ['{"a":1}', '{"done":true}']
    assert decode(b'{"a":1}\n{"cut') == ['{"a":1}', '{"cut']


def test_unicode_line_separators_are_not_line_ends() -> None:
    line = '{"t":"x\u2028y\u0085z"}'
    assert decode(line.encode() + b"\n") == [line]


def test_utf8_split_across_reads() -> None:
    body = '{"message":{"content":"你好 🌍"}}\n'.encode()
    for k in range(len(body) + 1):
        (line,) = decode(body[:k], body[k:])
        assert json.loads(line)["message"]["content"] == "你好 🌍"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_JSON, max_size=8),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
    st.lists(st.integers(min_value=0, max_value=2048), max_size=10),
)
def test_property_any_split_gives_the_same_lines(
    values: list[object], end: str, terminate_last: bool, cuts: list[int]
) -> None:
    lines = [json.dumps(v, ensure_ascii=False) for v in values]
    text = "".join(line + end for line in lines)
    if lines and not terminate_last:
        text = text[: -len(end)]
    body = text.encode()
    bounds = sorted({min(c, len(body)) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]
    assert decode(*pieces) == lines


# -- bounds (architecture §2: a line larger than 8 MiB is a protocol error)
# --------------------------

READ = 64 * 1024


def test_a_line_without_newline_is_rejected_at_the_read_that_crosses_8_mib() -> None:
    decoder = NDJSONDecoder()
    reads = 0
    with pytest.raises(StreamProtocolError, match="larger than 8388608 bytes"):
        while True:
            decoder.feed(b"x" * READ)
            reads += 1
    assert reads == MAX_FRAME_BYTES // READ  # the 129th read crosses the bound
    with pytest.raises(StreamProtocolError):
        decoder.close()


def test_a_long_line_is_held_within_its_bound() -> None:
    decoder = NDJSONDecoder()
    tracemalloc.start()
    try:
        with pytest.raises(StreamProtocolError):
            for _ in range(4 * MAX_FRAME_BYTES // READ):
                decoder.feed(b"y" * READ)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_FRAME_BYTES + 8 * READ


def test_lines_before_the_overflow_come_first_then_the_error() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a":1}\n' + b" " * (MAX_FRAME_BYTES + 1)) == ['{"a":1}']
    with pytest.raises(StreamProtocolError):
        decoder.feed(b"\n")


def test_a_line_of_exactly_8_mib_is_accepted() -> None:
    line = b'"' + b"z" * (MAX_FRAME_BYTES - 2) + b'"'
    assert decode(line[:5], line[5:] + b"\n") == [line.decode()]
