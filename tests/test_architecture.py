"""The layout rules of DESIGN §1, checked on the source: imports point one way, and the deciding
cores are sans-I/O."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "channels", "providers", "config")

# DESIGN §1: orchestrator → channels, providers, config; channels → config; providers → config.
ALLOWED = {
    "orchestrator": {"orchestrator", "channels", "providers", "config"},
    "channels": {"channels", "config"},
    "providers": {"providers", "config"},
    "config": {"config"},
}

CORES = [
    "providers/sse.py",
    "providers/ndjson.py",
    "providers/error_events.py",
    "providers/stream_reducer.py",
    "providers/openai_chat_decode.py",
    "providers/anthropic_decode.py",
    "providers/responses_decode.py",
    "providers/ollama_decode.py",
    "orchestrator/think.py",
    "orchestrator/delivery/engine.py",
    "orchestrator/delivery/splitting.py",
    "orchestrator/policy/catalogue.py",
    "orchestrator/policy/shapes.py",
    "orchestrator/policy/views.py",
    "orchestrator/policy/window.py",
    "orchestrator/policy/pieces.py",
    "channels/telegram_format.py",
]
IO_MODULES = {"asyncio", "anyio", "trio", "httpx", "httpcore", "telegram", "aiohttp"}
"""Event loops and network clients. (``socket`` is not listed: the standard library loads it
for unrelated reasons, e.g. ``email.utils`` through pydantic.)"""


def imported_modules(path: Path) -> set[str]:
    """Absolute imports of a module, wherever they stand in it."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        todo.extend(ast.iter_child_nodes(node))
    return names


def modules_of(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package: str) -> None:
    wrong = []
    for path in modules_of(package):
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top in PACKAGES and top not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(REPO)} imports {name}")
    assert wrong == []


@pytest.mark.parametrize("core", CORES)
def test_deciding_cores_are_sans_io(core: str) -> None:
    """Importing a core in a fresh interpreter loads no asyncio and no network library, directly
    or through anything it imports (STYLE §1)."""
    assert (REPO / core).exists(), core
    module = core.removesuffix(".py").replace("/", ".")
    code = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        f"print(','.join(sorted(set({sorted(IO_MODULES)!r}) & set(sys.modules))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, module],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
    )
    assert result.stdout.strip() == ""
