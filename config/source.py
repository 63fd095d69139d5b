"""Read a YAML config text into plain data, remembering the line of every key (architecture §6).

Theory of operation
-------------------
PyYAML's ``compose`` builds a node tree whose nodes carry marks (0-based line and column). We walk
that tree ourselves instead of calling ``safe_load``:

* every mapping key and sequence item records ``loc -> line`` in :attr:`SourceDocument.lines`,
  so a pydantic error location can be mapped back to a line;
* mapping keys are taken as written (the scalar's text), so ``on:`` or ``1:`` stay strings;
* string scalars go through :func:`interpolate` (``${VAR}``, ``${VAR:-default}``, and ``$$``
  for a literal ``$``, as docker compose writes it); the paths whose value used the environment
  are remembered, so no message ever shows them, and the names each value refers to
  (:attr:`SourceDocument.variables`), so a hint names a variable only where the file reads one;
  a ``$NAME`` without braces is a warning (it is taken literally: a shell habit);
* booleans follow YAML 1.2 (only ``true``/``false``): under YAML 1.1 ``stream_mode: off``
  would silently become ``False``;
* duplicate keys are errors (PyYAML silently keeps the last one); ``<<`` merge keys work;
* a recursive alias, or alias expansion beyond :data:`MAX_NODES`, is an error;
* a text larger than :data:`MAX_FILE_BYTES`, or collections nested deeper than :data:`MAX_DEPTH`
  (aliases expanded), is one error: the nesting is measured on PyYAML's event stream, which is
  produced without recursion, before the (recursive) composer runs.

Problems found here are returned as :class:`ConfigIssue` values, never raised, so the loader can
report them together with the validation errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from config.errors import ConfigIssue, Loc, format_path

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "TOO_LARGE_MESSAGE",
    "InterpolationError",
    "SourceDocument",
    "interpolate",
    "read_yaml",
    "reference_names",
]

MAX_NODES = 100_000
"""Upper bound on values built from one document, aliases expanded ("billion laughs")."""
MAX_FILE_BYTES = 1024 * 1024
"""Upper bound on the size of a config file, in bytes (of UTF-8)."""
MAX_DEPTH = 64
"""Upper bound on the nesting of mappings and sequences (the config itself needs 6 levels)."""
TOO_LARGE_MESSAGE = f"the file is larger than {MAX_FILE_BYTES // 1024 // 1024} MiB"

_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG = "tag:yaml.org,2002:bool"


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans: ``yes``/``no``/``on``/``off`` stay strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)

# ``$$`` is an escaped literal ``$`` (docker compose's rule: ``$${X}`` is ``${X}``, ``$$USD``
# is ``$USD``); ``${`` opens a reference that runs to the next ``}``.
_REFERENCE = re.compile(r"\$\$|\$\{(?P<body>[^}]*)(?P<close>\})?")
# ``$NAME`` (no braces) is not a reference; almost always meant as one (shell habit).
_BARE_REFERENCE = re.compile(r"(?<!\$)\$[A-Za-z_][A-Za-z0-9_]*")
_BODY = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>.*))?", re.DOTALL)


class InterpolationError(ValueError):
    """A ``${...}`` reference cannot be resolved; the message names the variable, never a value."""


def reference_names(text: str) -> tuple[str, ...]:
    """The names of the environment variables ``text`` (a value as written) refers to, in
    order: ``"${A}/${B:-x} costs $$C"`` → ``("A", "B")``."""
    if "$" not in text:
        return ()
    names = []
    for match in _REFERENCE.finditer(text):
        body = _BODY.fullmatch(match.group("body") or "")
        if match.group(0) != "$$" and body is not None:
            names.append(body.group("name"))
    return tuple(dict.fromkeys(names))


def interpolate(text: str, environ: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """Expand environment references in one string scalar.

    ``${NAME}`` is the variable's value (an empty value is kept); ``${NAME:-default}`` is the
    default when the variable is unset *or empty* (as in POSIX shells); ``$$`` is a literal
    ``$`` (so ``$${`` is a literal ``${``). A default runs to the first ``}`` and is not
    itself expanded.

    Args:
        text: the scalar as written in the file.
        environ: the environment to read.

    Returns:
        ``(value, environment_values)``: the expanded text, and the values read from
        ``environ`` for it, in order (empty when nothing came from the environment). Such a
        value must never appear in a message.

    Raises:
        InterpolationError: a variable without default is not set, or a reference is malformed.
    """
    if "$" not in text:
        return text, ()
    environment_values: list[str] = []
    parts: list[str] = []
    position = 0
    for match in _REFERENCE.finditer(text):
        parts.append(text[position : match.start()])
        position = match.end()
        if match.group(0) == "$$":
            parts.append("$")
            continue
        body = _BODY.fullmatch(match.group("body"))
        if match.group("close") is None or body is None:
            raise InterpolationError(
                "malformed ${...} reference (expected ${NAME} or ${NAME:-default}; "
                "write $$ for a literal $)"
            )
        name, default = body.group("name"), body.group("default")
        value = environ.get(name)
        if default is not None and not value:
            parts.append(default)
        elif value is None:
            raise InterpolationError(f"environment variable {name} is not set")
        else:
            parts.append(value)
            environment_values.append(value)
    parts.append(text[position:])
    return "".join(parts), tuple(environment_values)


@dataclass(slots=True)
class SourceDocument:
    """A YAML document read into plain data.

    Attributes:
        data: dicts, lists and scalars (``{}`` for an empty document); ``None`` when the text is
            not valid YAML.
        lines: 1-based line of every key path (mapping key or sequence item); ``()`` is the
            document start.
        from_environment: paths of values that contain text read from the environment.
        environment_values: every value read from the environment (scrubbed from messages).
        written: the text as written (references unexpanded) of every value in
            ``from_environment``.
        variables: the environment variables each value's text refers to (``${NAME}`` or
            ``${NAME:-default}``), by path, in order; values without a reference are absent.
        failed: paths whose value could not be built (the loader ignores further errors there).
        issues: problems found while reading (syntax, interpolation, duplicate keys).
    """

    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)
    from_environment: set[Loc] = field(default_factory=set)
    environment_values: set[str] = field(default_factory=set)
    written: dict[Loc, str] = field(default_factory=dict)
    variables: dict[Loc, tuple[str, ...]] = field(default_factory=dict)
    failed: set[Loc] = field(default_factory=set)
    issues: list[ConfigIssue] = field(default_factory=list)

    def line_of(self, loc: Loc) -> int:
        """The line of the longest prefix of ``loc`` that is in the file (a missing key: its
        parent's line)."""
        for end in range(len(loc), -1, -1):
            line = self.lines.get(loc[:end])
            if line is not None:
                return line
        return 1


def _yaml_problem(exc: yaml.MarkedYAMLError) -> str:
    """The problem text of a YAML error, without the source snippet ``str(exc)`` would quote."""
    if exc.context and exc.problem:
        return f"{exc.context}: {exc.problem}"
    return exc.problem or exc.context or "invalid YAML"


class _TooLarge(Exception):
    """Aborts the walk: alias expansion exceeded MAX_NODES."""


class _TooDeep(Exception):
    """Aborts the walk: aliases nest collections deeper than MAX_DEPTH."""


def _too_deep_line(loader: _Loader) -> int | None:
    """Read the whole event stream; the 1-based line where nesting first exceeds MAX_DEPTH, or
    None. Syntax errors propagate as the composer would raise them."""
    depth = 0
    while loader.check_event():
        event = loader.get_event()  # type: ignore[no-untyped-call]
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                return mark.line + 1 if mark is not None else 1
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None


_DEPTH_MESSAGE = f"nested more than {MAX_DEPTH} levels deep"


class _Walker:
    def __init__(
        self, loader: _Loader, environ: Mapping[str, str], doc: SourceDocument, source: str
    ) -> None:
        self._loader = loader
        self._environ = environ
        self._doc = doc
        self._source = source
        self._active: set[int] = set()  # ids of collection nodes being built (alias cycles)
        self._count = 0
        self._depth = 0

    def issue(self, line: int, loc: Loc | str, message: str) -> None:
        path = loc if isinstance(loc, str) else format_path(loc)
        self._doc.issues.append(ConfigIssue(self._source, line, path, message))

    def build(self, node: Node, loc: Loc) -> Any:
        self._count += 1
        if self._count > MAX_NODES:
            raise _TooLarge
        line = node.start_mark.line + 1
        if isinstance(node, ScalarNode):
            return self._scalar(node, loc, line)
        if id(node) in self._active:
            self.issue(line, "yaml", "recursive alias")
            self._doc.failed.add(loc)
            return None
        if self._depth >= MAX_DEPTH:
            raise _TooDeep(line)
        self._active.add(id(node))
        self._depth += 1
        try:
            if isinstance(node, MappingNode):
                return self._mapping(node, loc, line)
            return self._sequence(node, loc, line)  # type: ignore[arg-type]
        finally:
            self._depth -= 1
            self._active.discard(id(node))

    def _scalar(self, node: ScalarNode, loc: Loc, line: int) -> Any:
        try:
            value = self._loader.construct_object(node)
        except yaml.MarkedYAMLError as exc:
            self.issue(line, "yaml", _yaml_problem(exc))
            self._doc.failed.add(loc)
            return None
        except (ValueError, TypeError, ArithmeticError):  # e.g. ``!!int x``
            self._loader.recursive_objects.clear()
            self.issue(line, "yaml", f"the value is not a valid {node.tag}")
            self._doc.failed.add(loc)
            return None
        if node.tag != _STR_TAG or not isinstance(value, str):
            return value
        if _BARE_REFERENCE.search(value.replace("$$", "")):
            self._doc.issues.append(
                ConfigIssue(
                    self._source,
                    line,
                    format_path(loc),
                    "a $NAME without braces is taken literally: write ${NAME} to read an "
                    "environment variable, or $$ for a literal $",
                    warning=True,
                )
            )
        written = value
        try:
            value, environment_values = interpolate(value, self._environ)
        except InterpolationError as exc:
            self.issue(line, loc, str(exc))
            self._doc.failed.add(loc)
            return ""
        names = reference_names(written)
        if names:
            self._doc.variables[loc] = names
        if environment_values:
            self._doc.from_environment.add(loc)
            self._doc.written[loc] = written
            self._doc.environment_values.update(environment_values)
        return value

    def _mapping(self, node: MappingNode, loc: Loc, line: int) -> dict[str, Any]:
        if node.tag != _MAP_TAG:
            self.issue(line, "yaml", f"unsupported tag {node.tag!r} on a mapping")
            self._doc.failed.add(loc)
            return {}
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
                continue
            key_line = key_node.start_mark.line + 1
            if key_node.value in seen:
                self.issue(
                    key_line,
                    (*loc, key_node.value),
                    f"duplicate key (first defined on line {seen[key_node.value]})",
                )
            seen.setdefault(key_node.value, key_line)
        try:
            self._loader.flatten_mapping(node)  # resolves ``<<`` merge keys in place
        except yaml.MarkedYAMLError as exc:
            self.issue(line, "yaml", _yaml_problem(exc))
            self._doc.failed.add(loc)
            return {}
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                self.issue(key_line, loc, "mapping keys must be plain strings")
                self._doc.failed.add(loc)
                continue
            key = key_node.value
            self._doc.lines[(*loc, key)] = key_line
            result[key] = self.build(value_node, (*loc, key))
        return result

    def _sequence(self, node: SequenceNode, loc: Loc, line: int) -> list[Any]:
        if node.tag != _SEQ_TAG:
            self.issue(line, "yaml", f"unsupported tag {node.tag!r} on a sequence")
            self._doc.failed.add(loc)
            return []
        result: list[Any] = []
        for index, item in enumerate(node.value):
            self._doc.lines[(*loc, index)] = item.start_mark.line + 1
            result.append(self.build(item, (*loc, index)))
        return result


def read_yaml(text: str, *, source_name: str, environ: Mapping[str, str]) -> SourceDocument:
    """Parse one YAML document, interpolating the environment into string values.

    Args:
        text: the document.
        source_name: the file name used in issues.
        environ: the environment for ``${VAR}`` references.

    Returns:
        The document; check :attr:`SourceDocument.issues` (never raises for bad input).
    """
    doc = SourceDocument(data=None, lines={(): 1})
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        doc.issues.append(ConfigIssue(source_name, None, "", TOO_LARGE_MESSAGE))
        return doc
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # checks every character up front (ReaderError)
        deep = _too_deep_line(loader)
        if deep is not None:
            doc.issues.append(ConfigIssue(source_name, deep, "yaml", _DEPTH_MESSAGE))
            return doc
        loader.dispose()
        loader = _Loader(text)
        root = loader.get_single_node()
        if root is None:
            doc.data = {}
            return doc
        doc.lines[()] = root.start_mark.line + 1
        walker = _Walker(loader, environ, doc, source_name)
        try:
            doc.data = walker.build(root, ())
        except _TooLarge:
            doc.data = None
            walker.issue(doc.lines[()], "yaml", f"more than {MAX_NODES} values after aliases")
        except _TooDeep as exc:
            doc.data = None
            walker.issue(exc.args[0], "yaml", _DEPTH_MESSAGE + " (aliases expanded)")
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        # Only the problem text: str(exc) would quote the offending source line.
        problem = _yaml_problem(exc)
        lines = text.splitlines()
        source_line = lines[line - 1] if 0 < line <= len(lines) else ""
        if "flow" in problem and "${" in source_line:
            problem += " (inside [ ] or { }, quote a value that holds ${...})"
        doc.issues.append(ConfigIssue(source_name, line, "yaml", problem))
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        problem = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
        doc.issues.append(ConfigIssue(source_name, line, "yaml", problem))
    finally:
        if loader is not None:
            loader.dispose()
    return doc
