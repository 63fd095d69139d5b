"""The import graph of the four packages (architecture §1 "Imports"): no module imports itself
back through others, whether at load time or inside a function, and the outbound policy knows no
channel. Read from the source with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("config", "providers", "channels", "orchestrator")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports, anywhere in its text (a package's ``__init__`` is
    not counted for ``from package import module``)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    found.add(f"{base}.{alias.name}")
                elif base in known:
                    found.add(base)
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package_faces(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph without the arrows into a package's ``__init__`` that only hands names on: a
    face re-exports its modules, and importing a module through it is no cycle."""
    faces = {name for name in graph if (REPO / Path(*name.split(".")) / "__init__.py").exists()}
    return {name: {m for m in deps if m not in faces} for name, deps in graph.items()}


def test_no_module_imports_itself_back_through_others() -> None:
    assert _cycles(_package_faces(_graph())) == []


def test_the_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_outbound_policy_imports_no_channel() -> None:
    """The policy is told how a channel renders (a function given to it), never which."""
    graph = _graph()
    policy = {name: deps for name, deps in graph.items() if name.startswith("orchestrator.policy")}
    assert policy
    knowing = {
        name: sorted(d for d in deps if d.startswith("channels")) for name, deps in policy.items()
    }
    assert {name: deps for name, deps in knowing.items() if deps} == {}
