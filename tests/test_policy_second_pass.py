"""The redaction window reads the tokens the views' second decoding pass makes (architecture §4
"Live redaction window"): ``[postgres]`` + markup the view drops (an image, inline HTML, a soft
hyphen) or decodes (``&#40;``, ``%5D``) + ``(https://…)`` is a Markdown link only once the first
pass has read that markup, and the reader sees ``postgres://admin:…@…``. The window's scans begin
their views far enough back, counted in characters of that second view too, so that a password
there is masked in every state fed in any pieces, as ``redact`` masks it in the whole text."""

from __future__ import annotations

import pytest

from orchestrator.policy.catalogue import Redactor
from orchestrator.policy.window import RedactionWindow

SECRET = "hunter2hunter2"
TAIL = f"://admin:{SECRET}@db.example:5432/app " + "the " * 40
FORMS = {
    "an image dropped": "[postgres]![img](https://x.example/i.png)(https://db.example/docs)",
    "two images dropped": (
        "[postgres]![a](https://x.example/a.png)![b](https://x.example/b.png)"
        "(https://db.example/docs)"
    ),
    "inline HTML dropped": "[postgres]<b></b>(https://db.example/docs)",
    "a soft hyphen dropped": "[postgres]\u00ad(https://db.example/docs)",
    "a parenthesis decoded": "[postgres]&#40;https://db.example/docs)",
    "a bracket decoded": "[postgres%5D(https://db.example/docs)",
}
REDACTORS = {"pre-checks": Redactor(), "reference": Redactor(prechecks=False)}


def _windowed(redactor: Redactor, text: str, size: int, proofs: bool) -> list[str]:
    """Every state a reader could see: the text emitted so far after each piece."""
    window = RedactionWindow(redactor, reuse_proofs=proofs)
    shown, states = "", []
    for i in range(0, len(text), size):
        shown += window.feed(text[i : i + size])
        states.append(shown)
    states.append(shown + window.flush())
    return states


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("redactor", sorted(REDACTORS))
@pytest.mark.parametrize("proofs", [True, False], ids=["proofs", "no-proofs"])
def test_a_link_the_first_pass_makes_is_read_in_every_state(
    form: str, redactor: str, proofs: bool
) -> None:
    text = "See " + FORMS[form] + TAIL
    whole = Redactor().redact(text)
    assert SECRET not in whole  # the whole text's views read the link
    for size in (1, 2, 3, 5, 7, 16, 64):
        states = _windowed(REDACTORS[redactor], text, size, proofs)
        assert not any(SECRET in state for state in states), (size, states[-1])
        assert states[-1] == whole, size
