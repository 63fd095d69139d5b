"""The layout rules of DESIGN §1, checked on the source: imports point one way, and the deciding
cores are sans-I/O."""

from __future__ import annotations

import ast
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
    "orchestrator/policy/window.py",
    "orchestrator/policy/pieces.py",
]
IO_MODULES = {
    "asyncio",
    "anyio",
    "trio",
    "httpx",
    "httpcore",
    "socket",
    "telegram",
    "aiohttp",
    "ssl",
}


def imported_modules(path: Path, *, load_time_only: bool = False) -> set[str]:
    """Absolute imports of a module; with ``load_time_only``, those run when it is imported
    (not inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif load_time_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
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


def _core_and_its_local_imports(relative: str) -> dict[str, set[str]]:
    """The core module and every project module it imports, transitively, with their imports."""
    seen: dict[str, set[str]] = {}
    todo = [relative]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        names = imported_modules(REPO / rel, load_time_only=True)
        seen[rel] = names
        for name in names:
            if name.split(".")[0] in PACKAGES:
                candidate = name.replace(".", "/") + ".py"
                if (REPO / candidate).exists():
                    todo.append(candidate)
    return seen


@pytest.mark.parametrize("core", CORES)
def test_deciding_cores_are_sans_io(core: str) -> None:
    assert (REPO / core).exists(), core
    offending = {
        f"{rel} imports {name}"
        for rel, names in _core_and_its_local_imports(core).items()
        for name in names
        if name.split(".")[0] in IO_MODULES
    }
    assert offending == set()
