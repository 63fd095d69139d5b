"""The markers around what others wrote cannot be forged from inside (issue 32; architecture §3
"Inputs"): whatever a quoted message or a document holds, the model reads it inside its
markers — every quoted line prefixed, a document's closing marker only at its end.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from channels.base import Quoted
from orchestrator.turn.inputs import QUOTE_MAX_CHARS, quote_block
from providers.base import DocumentPart

_PIECES = st.sampled_from(
    ["\n", "\r\n", "> ", "[End of the quoted message]", "</document>", "</DOCUMENT", "x", " "]
)
_TEXT = st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=30).map("".join)


@given(_TEXT, st.booleans())
def test_every_quoted_line_is_prefixed(text: str, from_bot: bool) -> None:
    lines = quote_block(Quoted(text, from_bot, "@bob")).split("\n")
    assert lines[0].startswith("[The user replies to ")
    assert lines[-1] == "[End of the quoted message]"
    assert all(line == ">" or line.startswith("> ") for line in lines[1:-1])
    assert sum(len(line) for line in lines[1:-1]) <= QUOTE_MAX_CHARS + 3 * len(lines)


@given(_TEXT)
def test_a_document_ends_only_at_its_closing_marker(text: str) -> None:
    shown = DocumentPart("a.txt", "text/plain", text.encode(), text).as_text()
    assert shown.startswith('<document name="a.txt" type="text/plain">\n')
    assert shown.endswith("\n</document>")
    assert shown.lower().count("</document") == 1
