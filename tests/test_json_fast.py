"""The JSON-parse seam (providers/json_fast.py) parses as ``json.loads`` does, msgspec or not."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.json_fast import loads

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(JSON)
def test_any_json_value_parses_to_what_json_loads_gives(value: object) -> None:
    text = json.dumps(value)
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"delta": "\\ud83d"}',  # a lone surrogate: half an emoji split across two tokens
        '{"x": NaN, "y": Infinity}',
        '{"n": 123456789012345678901234567890}',  # beyond 64 bits: still an int
        '{"n": -9223372036854775809, "m": 18446744073709551616}',
        '{"x": 1e400}',  # json reads inf
        '["\ud800"]',  # a lone surrogate code point in the text itself
    ],
)
def test_what_msgspec_refuses_and_json_accepts_still_parses(text: str) -> None:
    assert repr(loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize(
    "data",
    [
        b'"\xed\xa0\x80"',  # an encoded surrogate: json reads it (surrogatepass)
        b"\xef\xbb\xbf[1]",  # a UTF-8 BOM
        "[1]".encode("utf-16"),
    ],
)
def test_bytes_parse_as_json_loads_parses_them(data: bytes) -> None:
    assert repr(loads(data)) == repr(json.loads(data))


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} x', "[1,]", "1" * 5000, '"\\x"'])
def test_what_is_not_json_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        loads(text)
