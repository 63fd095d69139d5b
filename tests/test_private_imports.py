"""No module of the project (outside tests) reaches under the public API of httpx or httpcore:
it imports no private (``_``-prefixed) module or name of theirs and reads no private attribute
of the modules themselves; checked by parsing the source with :mod:`ast`. A private layout
changes without notice in any release (architecture §2 "Transport")."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUARDED = ("httpx", "httpcore")


def project_modules() -> list[Path]:
    """Every ``.py`` file of the project outside ``tests/`` and hidden directories."""
    return sorted(
        path
        for path in REPO.rglob("*.py")
        if not any(part.startswith(".") or part in ("tests", "build") for part in
                   path.relative_to(REPO).parts[:-1])
    )  # fmt: skip


def _is_private(name: str) -> bool:
    """``_x`` is private; a dunder (``__version__``) is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private(dotted: str) -> bool:
    """``dotted`` names a guarded library and one of its parts is private."""
    parts = dotted.split(".")
    return parts[0] in GUARDED and any(_is_private(part) for part in parts[1:])


def private_uses(source: str) -> list[str]:
    """The private names of httpx/httpcore that ``source`` imports or reads, as written."""
    found: list[str] = []
    tree = ast.parse(source)
    aliases: set[str] = set()  # the local names bound to a guarded module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"import {alias.name}")
                if alias.name in GUARDED:
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if _private(f"{node.module}.{alias.name}"):
                    found.append(f"from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _is_private(node.attr)
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_the_check_sees_every_form_of_private_use() -> None:
    source = (
        "import httpx._client\n"
        "from httpx._transports.default import AsyncResponseStream\n"
        "from httpcore import _synchronization\n"
        "import httpx as h\n"
        "h._utils\n"
        "import httpx, httpcore\n"
        "from httpx import AsyncClient, Timeout\n"
        "httpx.AsyncClient, httpx.__version__\n"
    )
    assert private_uses(source) == [
        "import httpx._client",
        "from httpx._transports.default import AsyncResponseStream",
        "from httpcore import _synchronization",
        "h._utils",
    ]


def test_no_project_module_uses_a_private_name_of_httpx_or_httpcore() -> None:
    modules = project_modules()
    assert any(path.parts[-2:] == ("providers", "transport.py") for path in modules)
    found = {
        str(path.relative_to(REPO)): uses
        for path in modules
        if (uses := private_uses(path.read_text(encoding="utf-8")))
    }
    assert found == {}
