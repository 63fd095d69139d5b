"""Reading YAML with line numbers and ``${VAR}`` interpolation (config/source.py, architecture
§6)."""

from __future__ import annotations

import pytest

from config.source import MAX_NODES, InterpolationError, interpolate, read_yaml

# -- interpolate ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected", "environment_values"),
    [
        ("plain", "plain", ()),
        ("${A}", "alpha", ("alpha",)),
        ("x-${A}-y", "x-alpha-y", ("alpha",)),
        ("${A}${B}", "alphabeta", ("alpha", "beta")),
        ("${MISSING:-fallback}", "fallback", ()),
        ("${EMPTY:-fallback}", "fallback", ()),
        ("${A:-fallback}", "alpha", ("alpha",)),
        ("${MISSING:-}", "", ()),
        ("${EMPTY}", "", ("",)),
        ("$${A}", "${A}", ()),
        ("cost: $5 and $$", "cost: $5 and $", ()),
        ("$$USD and $$$${A}", "$USD and $${A}", ()),
        ("$$${A}", "$alpha", ("alpha",)),
        ("$${A} and ${A}", "${A} and alpha", ("alpha",)),
        ("${MISSING:-a:-b}", "a:-b", ()),
    ],
)
def test_interpolate(text: str, expected: str, environment_values: tuple[str, ...]) -> None:
    environ = {"A": "alpha", "B": "beta", "EMPTY": ""}
    assert interpolate(text, environ) == (expected, environment_values)


def test_interpolate_missing_variable_names_it() -> None:
    with pytest.raises(InterpolationError, match=r"^environment variable NOPE is not set$"):
        interpolate("a ${NOPE} b", {})


@pytest.mark.parametrize("text", ["${", "${A", "${}", "${1A}", "${A B}", "${A:default}"])
def test_interpolate_malformed(text: str) -> None:
    with pytest.raises(InterpolationError, match=r"malformed \$\{\.\.\.\} reference"):
        interpolate(text, {"A": "alpha"})


# -- read_yaml --------------------------------------------------------------------------------


def _read(text: str, **environ: str):  # type: ignore[no-untyped-def]
    return read_yaml(text, source_name="f.yaml", environ=environ)


def test_lines_of_keys_and_items() -> None:
    doc = _read("a:\n  b: 1\n  c:\n    - x\n    - y\nd: [1, 2]\n")
    assert doc.issues == []
    assert doc.data == {"a": {"b": 1, "c": ["x", "y"]}, "d": [1, 2]}
    assert doc.lines[("a",)] == 1
    assert doc.lines[("a", "b")] == 2
    assert doc.lines[("a", "c", 0)] == 4
    assert doc.lines[("a", "c", 1)] == 5
    assert doc.lines[("d", 1)] == 6


def test_yaml_1_2_booleans_keep_off_a_string() -> None:
    doc = _read("a: off\nb: yes\nc: on\nd: no\ne: true\nf: False\n")
    assert doc.data == {"a": "off", "b": "yes", "c": "on", "d": "no", "e": True, "f": False}


def test_keys_are_taken_as_written() -> None:
    assert _read("1: a\non: b\nnull: c\n").data == {"1": "a", "on": "b", "null": "c"}


def test_interpolation_only_in_string_values_and_tracked() -> None:
    doc = _read('a: ${T}\nb: "${T}"\n${T}: 1\nc: [x, "${T}"]\n', T="tok")
    assert doc.data == {"a": "tok", "b": "tok", "${T}": 1, "c": ["x", "tok"]}
    assert doc.from_environment == {("a",), ("b",), ("c", 1)}
    assert doc.environment_values == {"tok"}


def test_missing_variable_is_an_issue_at_the_key() -> None:
    doc = _read("x: 1\nchannels:\n  tg:\n    token: ${TELEGRAM_BOT_TOKEN}\n")
    assert [str(i) for i in doc.issues] == [
        "f.yaml:4: channels.tg.token: environment variable TELEGRAM_BOT_TOKEN is not set"
    ]
    assert doc.failed == {("channels", "tg", "token")}


def test_syntax_error_reports_the_mark_and_no_snippet() -> None:
    doc = _read("a: 1\nb: c: sk-secretvalue\n")
    assert doc.data is None
    assert [str(i) for i in doc.issues] == ["f.yaml:2: yaml: mapping values are not allowed here"]


def test_unquoted_reference_in_a_flow_sequence_gets_a_hint() -> None:
    doc = _read("a: [x, ${B}]\n", B="b")
    assert len(doc.issues) == 1
    assert doc.issues[0].line == 1
    assert doc.issues[0].message.endswith("(inside [ ] or { }, quote a value that holds ${...})")


def test_duplicate_key_is_an_error() -> None:
    doc = _read("a:\n  b: 1\n  b: 2\n")
    assert [str(i) for i in doc.issues] == [
        "f.yaml:3: a.b: duplicate key (first defined on line 2)"
    ]


def test_merge_keys_work_and_may_be_overridden() -> None:
    doc = _read("base: &b\n  x: 1\n  y: 2\nother:\n  <<: *b\n  y: 3\n")
    assert doc.issues == []
    assert doc.data["other"] == {"x": 1, "y": 3}
    assert doc.lines[("other", "x")] == 2  # the line where the merged key is written


def test_recursive_alias_is_an_error() -> None:
    doc = _read("a: &a [*a]\n")
    assert [str(i) for i in doc.issues] == ["f.yaml:1: yaml: recursive alias"]


def test_alias_expansion_is_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]" for n in range(1, 6)]
    doc = _read("\n".join(lines) + "\n")
    assert doc.data is None
    assert [i.message for i in doc.issues] == [f"more than {MAX_NODES} values after aliases"]


def test_unknown_tag_and_bad_typed_scalar() -> None:
    doc = _read("a: !custom 1\nb: !!int twelve\n")
    assert [str(i) for i in doc.issues] == [
        "f.yaml:1: yaml: could not determine a constructor for the tag '!custom'",
        "f.yaml:2: yaml: the value is not a valid tag:yaml.org,2002:int",
    ]


def test_control_character_is_reported_with_its_line() -> None:
    doc = _read("a: 1\nb: '\x01'\n")
    assert [str(i) for i in doc.issues] == [
        "f.yaml:2: yaml: unacceptable character #x0001: special characters are not allowed"
    ]


def test_empty_document_is_an_empty_mapping() -> None:
    assert _read("# nothing\n").data == {}


def test_two_documents_are_an_error() -> None:
    doc = _read("a: 1\n---\nb: 2\n")
    assert [str(i) for i in doc.issues] == [
        "f.yaml:2: yaml: expected a single document in the stream: but found another document"
    ]
