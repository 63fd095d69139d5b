"""The repository explains itself (docs/architecture.md §1 "Citations").

Code, help texts and docs cite ``docs/architecture.md §N`` (a section) or
``docs/architecture.md §N "Name"`` (a named paragraph of that section). These tests check, on the
tracked files, that every such citation names a section — and a paragraph — that exists; that the
document keeps its fixed section numbers; that the citations still written in the older form,
naming the design file outside the repository, would all resolve once pointed at the document;
and that the numbers the document states are the numbers in the code.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
SELF = Path(__file__).resolve()
"""This file quotes citations as examples; it is left out of the scans."""

SCANNED_SUFFIXES = (".py", ".yaml", ".md")

SECTION_TITLES = {
    1: "Layout and direction of imports",
    2: "Providers",
    3: "Channels",
    4: "Outbound policy",
    5: "The turn loop",
    6: "Config",
    7: "Daemon, CLI, store",
    8: "Tests and real peers",
    9: "Beyond one machine",
}
"""The numbered sections; their numbers are what citations point at, so they never change."""

_REFS = r"§\d+(?:\s*(?:[/,]|and)\s*§\d+)*"
_NAME = r'(?:\s+"(?P<name>[^"]{1,100})")?'
CITATION = re.compile(r"\b(?:docs/)?architecture(?:\.md)?\s+(?P<refs>" + _REFS + ")" + _NAME)
"""``docs/architecture.md §N``, ``architecture §N``, ``§2/§5`` lists, an optional quoted name."""
OLD_CITATION = re.compile(r"\bDESIGN\s+(?P<refs>" + _REFS + ")" + _NAME)
"""The older form, naming the design file that lives outside the repository."""
OLD_CITATION_ANYWHERE = re.compile(r"\bDESIGN\s*§")

_SECTION_HEADING = re.compile(r"^## (?P<number>\d+)\. (?P<title>.+?)\s*$")
_ANY_HEADING = re.compile(r"^## ")
_BOLD_HEAD = re.compile(r"^(?:[-*] )?\*\*(?P<head>[^*]+?)\.?\*\*")
_SUB_HEADING = re.compile(r"^#{3,6} (?P<head>.+?)\s*$")
_CONTINUATION = re.compile(r"\s*\n\s*(?:#\s*)?")


# -- the document ------------------------------------------------------------------------------


@dataclass
class Section:
    number: int
    title: str
    heads: set[str] = field(default_factory=set)
    """Lower-cased names of the section's run-in bold heads and ``###`` headings."""
    lines: list[str] = field(default_factory=list)

    @property
    def plain(self) -> str:
        """The section's text, lower-cased, without emphasis or code marks, spaces collapsed."""
        return _plain(" ".join(self.lines))


def _plain(text: str) -> str:
    return " ".join(text.replace("*", "").replace("`", "").lower().split())


def parse_sections(text: str) -> dict[int, Section]:
    """The numbered ``## N. Title`` sections of a document, with their heads and text.

    Raises:
        ValueError: a section number appears twice.
    """
    sections: dict[int, Section] = {}
    current: Section | None = None
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            if current is not None:
                current.lines.append(line)
            continue
        heading = _SECTION_HEADING.match(line)
        if heading:
            number = int(heading["number"])
            if number in sections:
                raise ValueError(f"section {number} appears twice")
            current = sections[number] = Section(number, heading["title"])
            continue
        if _ANY_HEADING.match(line):
            current = None  # an unnumbered part (overview, tables) belongs to no section
            continue
        if current is None:
            continue
        current.lines.append(line)
        for pattern in (_BOLD_HEAD, _SUB_HEADING):
            head = pattern.match(line)
            if head:
                current.heads.add(" ".join(head["head"].lower().split()))
    return sections


def unresolved(sections: dict[int, Section], refs: str, name: str | None) -> str | None:
    """Why a citation does not resolve, or ``None`` when it does.

    Every ``§N`` in ``refs`` must be a section; a quoted ``name`` (cited with one section) must
    be a head of that section or a phrase its text contains.
    """
    numbers = [int(n) for n in re.findall(r"§(\d+)", refs)]
    missing = [n for n in numbers if n not in sections]
    if missing:
        return "no section " + ", ".join(f"§{n}" for n in missing)
    if name is not None:
        wanted = " ".join(_CONTINUATION.sub(" ", name).lower().split())
        section = sections[numbers[-1]]
        if wanted not in section.heads and _plain(wanted) not in section.plain:
            return f"§{section.number} has no paragraph {name!r}"
    return None


# -- the tracked files -------------------------------------------------------------------------


def tracked_files() -> list[Path]:
    """The repository's tracked ``.py``/``.yaml``/``.md`` files.

    From ``git ls-files`` in a checkout; in a copy without ``.git`` (``.ci/run`` tests an archive
    of ``HEAD``) every file is tracked, so the tree is walked instead, minus what a set-up adds.
    """
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if Path(top).resolve() != REPO:
            raise FileNotFoundError(top)
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout.decode()
        paths = [REPO / name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        paths = [
            path
            for path in REPO.rglob("*")
            if not any(
                part.startswith(".") or part == "__pycache__" or part.endswith(".egg-info")
                for part in path.relative_to(REPO).parts
            )
        ]
    return sorted(
        path
        for path in paths
        if path.suffix in SCANNED_SUFFIXES and path.is_file() and path.resolve() != SELF
    )


@dataclass(frozen=True)
class Citation:
    path: str
    line: int
    refs: str
    name: str | None

    def __str__(self) -> str:
        quoted = f' "{self.name}"' if self.name else ""
        return f"{self.path}:{self.line}: {' '.join(self.refs.split())}{quoted}"


def citations(pattern: re.Pattern[str], paths: list[Path]) -> list[Citation]:
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Citation(str(path.relative_to(REPO)), line, match["refs"], match["name"]))
    return found


@pytest.fixture(scope="module")
def sections() -> dict[int, Section]:
    return parse_sections(DOC.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def files() -> list[Path]:
    return tracked_files()


# -- the checks --------------------------------------------------------------------------------


def test_the_numbered_sections_are_fixed(sections: dict[int, Section]) -> None:
    assert {n: s.title for n, s in sections.items()} == SECTION_TITLES


def test_every_citation_of_the_document_resolves(
    sections: dict[int, Section], files: list[Path]
) -> None:
    broken = [
        f"{c}: {why}"
        for c in citations(CITATION, files)
        if (why := unresolved(sections, c.refs, c.name)) is not None
    ]
    assert broken == []


def test_every_old_citation_would_resolve_in_the_document(
    sections: dict[int, Section], files: list[Path]
) -> None:
    """The citations of the outside design file keep its section numbers and paragraph names,
    so pointing them at docs/architecture.md is a mechanical rename."""
    found = citations(OLD_CITATION, files)
    broken = [
        f"{c}: {why}" for c in found if (why := unresolved(sections, c.refs, c.name)) is not None
    ]
    assert broken == []


def test_no_file_outside_docs_cites_the_outside_design_file(files: list[Path]) -> None:
    citing = [
        str(path.relative_to(REPO))
        for path in files
        if path.relative_to(REPO).parts[0] != "docs"
        and OLD_CITATION_ANYWHERE.search(path.read_text(encoding="utf-8"))
    ]
    assert citing == []


def test_the_document_cites_nothing_outside_the_repository() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert OLD_CITATION_ANYWHERE.search(text) is None
    assert "DESIGN.md" not in text and "STYLE" not in text and "../" not in text
    for target in re.findall(r"\]\((?!https?://|#)([^)\s]+)\)", text):
        assert (DOC.parent / target).exists(), target


def test_the_readme_links_the_document() -> None:
    assert "](docs/architecture.md)" in (REPO / "README.md").read_text(encoding="utf-8")


# -- the checker itself --------------------------------------------------------------------------

_SAMPLE = """\
# Title
## Overview
**Not a head.** Unnumbered parts belong to no section.
## 1. One
**Tree.** A tree.
## 2. Two
- **Hook** `on_message_sending(...)`: Logs pass through the same
  redactor.
### Live window
```
## 7. not a heading inside code
```
"""


def test_the_checker_reads_sections_heads_and_text() -> None:
    sections = parse_sections(_SAMPLE)
    assert {n: s.title for n, s in sections.items()} == {1: "One", 2: "Two"}
    assert sections[1].heads == {"tree"}
    assert sections[2].heads == {"hook", "live window"}
    assert unresolved(sections, "§1", None) is None
    assert unresolved(sections, "§2/§1", None) is None
    assert unresolved(sections, "§2", "Hook") is None
    assert unresolved(sections, "§2", "Live window") is None
    assert unresolved(sections, "§2", "Logs pass through the same\n    redactor") is None


def test_the_checker_reports_what_does_not_resolve() -> None:
    sections = parse_sections(_SAMPLE)
    assert unresolved(sections, "§3", None) == "no section §3"
    assert unresolved(sections, "§1, §7", None) == "no section §7"
    assert unresolved(sections, "§1", "Hook") == "§1 has no paragraph 'Hook'"
    assert unresolved(sections, "§2", "Unnumbered parts") is not None  # not in a section
    with pytest.raises(ValueError, match="twice"):
        parse_sections("## 1. A\n## 1. B\n")


def test_the_citation_pattern_finds_every_form() -> None:
    text = (
        'see docs/architecture.md §3 "Network errors"; architecture §2/§5, and\n'
        "docs/architecture.md §3,\n§4, §7 for more; an architecture of §9 is no citation"
    )
    found = [(m["refs"], m["name"]) for m in CITATION.finditer(text)]
    assert found == [("§3", "Network errors"), ("§2/§5", None), ("§3,\n§4, §7", None)]


# -- the numbers ---------------------------------------------------------------------------------

NUMBERS = {
    "Redaction holdback": ("orchestrator.policy.window", "HOLDBACK_BYTES", 1),
    "Redaction rescan step": ("orchestrator.policy.window", "RESCAN_BYTES", 1),
    "Redaction scan step past a proof": ("orchestrator.policy.window", "SCAN_STEP_CHARS", 1),
    "Held run without whitespace": ("orchestrator.policy.window", "RUN_LIMIT_BYTES", 1),
    "Piece guard history context": ("orchestrator.policy.pieces", "HISTORY_CONTEXT_CHARS", 1),
    "Hook output cap": ("orchestrator.policy.hook", "HOOK_OUTPUT_MAX_CHARS", 1),
    "Telegram message limit": ("channels.telegram.kind", "TELEGRAM_MAX_TEXT_LENGTH", 1),
    "Discord message limit": ("channels.discord.kind", "DISCORD_MAX_CONTENT_LENGTH", 1),
    "Matrix message limit": ("channels.matrix.kind", "MATRIX_MAX_TEXT_LENGTH", 1),
    "Status room in a draft": ("orchestrator.delivery.drafts", "STATUS_ROOM", 1),
    "Least fill of a split message": ("orchestrator.delivery.splitting", "MIN_FILL", 100),
    "Write attempts after timeouts": ("orchestrator.delivery.planning", "MAX_ATTEMPTS", 1),
    "Connect timeout": ("providers.transport", "CONNECT_TIMEOUT_SECS", 1),
    "Queue per conversation": ("orchestrator.chats.dispatch", "MAX_QUEUED_PER_CONVERSATION", 1),
    "Shutdown grace": ("orchestrator.ops.daemon", "SHUTDOWN_GRACE_SECS", 1),
    "YAML alias expansion": ("config.source", "MAX_NODES", 1),
}
"""Rows of the document's "Numbers" table → the constant whose value (times a scale) the row's
first number states."""


def numbers_table(text: str) -> dict[str, str]:
    """``label -> value`` cells of the ``## Numbers`` table."""
    part = text.split("\n## Numbers\n", 1)[1]
    rows = {}
    for line in part.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) >= 2 and line.startswith("|"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


@pytest.mark.parametrize("label", sorted(NUMBERS))
def test_the_numbers_table_states_the_code(label: str) -> None:
    module_name, constant, scale = NUMBERS[label]
    value = getattr(importlib.import_module(module_name), constant) * scale
    cell = numbers_table(DOC.read_text(encoding="utf-8"))[label]
    first = re.search(r"\d[\d ]*", cell)
    assert first is not None, cell
    assert float(first.group().replace(" ", "")) == value, (
        f"docs/architecture.md 'Numbers' says {label}: {cell}; {module_name}.{constant} "
        f"is {value}: update the document"
    )


# -- the module index and the error classes ----------------------------------------------------

PACKAGES = ("config", "providers", "channels", "orchestrator")


def _package_modules() -> set[str]:
    """Every module file of the packages (read from the tree: CI runs outside a git checkout)."""
    return {
        path.relative_to(REPO).as_posix()
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "__pycache__" not in path.parts and path.name != "__init__.py"
    }


def _index_rows() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("**Module index.**")
    end = text.index("\n**", start + 1)
    return re.findall(r"^\| `([^`]+\.py)` \|", text[start:end], flags=re.MULTILINE)


def test_the_module_index_names_every_module_once() -> None:
    rows = _index_rows()
    assert len(rows) == len(set(rows))
    assert set(rows) == _package_modules()


def _exception_classes() -> set[str]:
    """The exception classes the packages define: those whose bases are exceptions, to a fixed
    point (``ModelNotFound(ProviderBadRequest)`` is one through ``ProviderError``)."""
    import ast
    import builtins

    bases: dict[str, set[str]] = {}
    for module in _package_modules():
        tree = ast.parse((REPO / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases[node.name] = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
    known = {
        name
        for name, value in vars(builtins).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    found: set[str] = set()
    while True:
        more = {n for n, b in bases.items() if n not in found and b & (known | found)}
        if not more:
            return found
        found |= more


def test_the_document_names_every_error_class_of_the_code() -> None:
    """A reader of the map finds every error the code raises across a boundary by its name."""
    text = DOC.read_text(encoding="utf-8")
    missing = sorted(name for name in _exception_classes() if f"`{name}`" not in text)
    assert missing == []
