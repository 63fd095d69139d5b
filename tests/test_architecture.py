"""The layout rules of architecture §1, checked on the source: imports point one way, and the
deciding cores are sans-I/O."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from channels.registry import KINDS

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "channels", "providers", "config")

# architecture §1: orchestrator → channels, providers, config; channels → config; providers →
# config; config → the channel registry alone (the ``channels`` section is the kinds' models).
ALLOWED = {
    "orchestrator": {"orchestrator", "channels", "providers", "config"},
    "channels": {"channels", "config"},
    "providers": {"providers", "config"},
    "config": {"config", "channels.registry"},
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
    "orchestrator/turn/think.py",
    "orchestrator/turn/history_budget.py",
    "orchestrator/turn/compaction.py",
    "orchestrator/delivery/engine.py",
    "orchestrator/delivery/drafts.py",
    "orchestrator/delivery/draft_layout.py",
    "orchestrator/delivery/draft_scan.py",
    "orchestrator/delivery/draft_state.py",
    "orchestrator/delivery/pieces.py",
    "orchestrator/delivery/planning.py",
    "orchestrator/delivery/slots.py",
    "orchestrator/delivery/reply_state.py",
    "orchestrator/delivery/status_messages.py",
    "orchestrator/delivery/events.py",
    "orchestrator/delivery/splitting.py",
    "orchestrator/policy/catalogue.py",
    "orchestrator/policy/shapes.py",
    "orchestrator/policy/views.py",
    "orchestrator/policy/joints.py",
    "orchestrator/policy/window.py",
    "orchestrator/policy/pieces.py",
    "channels/telegram/format.py",
    "channels/openai_api/deltas.py",
    "channels/openai_api/wire.py",
    "channels/web/access.py",
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
            allowed = ALLOWED[package]
            if top in PACKAGES and top not in allowed and name not in allowed:
                wrong.append(f"{path.relative_to(REPO)} imports {name}")
    assert wrong == []


@pytest.mark.parametrize("core", CORES)
def test_deciding_cores_are_sans_io(core: str) -> None:
    """Importing a core in a fresh interpreter loads no asyncio and no network library, directly
    or through anything it imports."""
    assert (REPO / core).exists(), core
    module = core.removesuffix(".py").replace("/", ".")
    code = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        f"print(','.join(sorted(set({sorted(IO_MODULES)!r}) & set(sys.modules))))"
    )
    assert fresh_interpreter(code, module) == ""


def fresh_interpreter(code: str, *args: str) -> str:
    """What ``python -c code args`` prints, run on this checkout alone (stripped)."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
    )
    return result.stdout.strip()


def test_delivery_imports_nothing_from_the_policy() -> None:
    """architecture §1, §4: the engine and its driver see the policy only through a Protocol of
    their own (``orchestrator.delivery.hooks.PiecePolicy``)."""
    wrong = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in modules_of("orchestrator/delivery")
        for name in imported_modules(path)
        if name == "orchestrator.policy" or name.startswith("orchestrator.policy.")
    ]
    assert wrong == []


def test_the_policy_imports_no_channel() -> None:
    """architecture §4: the policy knows no channel; what a chat's reader sees of a formatted
    text (``Channel.visible_text``) is handed in by the caller."""
    wrong = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in modules_of("orchestrator/policy")
        for name in imported_modules(path)
        if name == "channels" or name.startswith("channels.")
    ]
    assert wrong == []


ADAPTERS = sorted(kind.adapter_module.replace(".", "/") + ".py" for kind in KINDS.values())
"""Every kind's adapter module, as the registry names it."""
SPLITTING = ("split", "find_cut", "fit_end", "render_chunk", "chunk")
NOT_TEXT = {"urlsplit", "split", "rsplit", "splitlines"}
"""Names with those words that cut no message text: URL parsing, and ``str`` methods (an
adapter parses a command's words with them; a message split into parts would need a splitter
or a loop of writes, which the other names and the wire tests catch)."""


def _names(path: Path) -> set[str]:
    """Every name an adapter module defines, imports or calls (attribute names included)."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_no_adapter_splits_text(adapter: str) -> None:
    """architecture §1, §3: the engine decides every message boundary; an adapter executes one
    platform write per action. Nothing that cuts a text is defined, imported or called in an
    adapter module, and nothing there sleeps (a 429 is the engine's to wait out)."""
    path = REPO / adapter
    assert path.exists(), adapter
    names = _names(path)
    cutting = sorted(n for n in names - NOT_TEXT if any(word in n.lower() for word in SPLITTING))
    assert cutting == []
    assert "sleep" not in names


def test_every_adapter_is_checked() -> None:
    """Every ``Channel`` subclass in ``channels/`` is a registered kind's adapter."""
    adapters = {
        str(p.relative_to(REPO))
        for p in (REPO / "channels").rglob("*.py")
        if any(
            isinstance(node, ast.ClassDef)
            and any(isinstance(base, ast.Name) and base.id == "Channel" for base in node.bases)
            for node in ast.walk(ast.parse(p.read_text()))
        )
    }
    assert adapters == set(ADAPTERS)


def test_a_bot_without_mcp_servers_starts_without_the_mcp_sdk() -> None:
    """architecture §5 "MCP": what ``relaybot run`` loads for a bot without MCP servers — the
    daemon, its start-up checks, the tool registry — does not import the ``mcp`` SDK (about a
    third of the start-up's CPU); the MCP client loads it."""
    code = (
        "import sys, orchestrator.cli, orchestrator.ops.daemon, orchestrator.ops.config_checks, "
        "orchestrator.tools.tool_setup; loaded = 'mcp' in sys.modules; "
        "import orchestrator.tools.mcp_client; print(loaded, 'mcp' in sys.modules)"
    )
    assert fresh_interpreter(code) == "False True"


def test_the_config_loads_no_adapter() -> None:
    """architecture §1, §3 "Kinds": the config imports the registry, whose ``kind`` modules are
    models and numbers; loading the config loads no adapter and no network library."""
    code = (
        "import sys, config.loader, config.schema; "
        "print(','.join(sorted(m for m in sys.modules if m.endswith('.adapter') "
        f"or m.split('.')[0] in {sorted(IO_MODULES | {'discord', 'nio'})!r})))"
    )
    assert fresh_interpreter(code) == ""


def test_each_kind_lives_in_its_folder() -> None:
    """architecture §3 "Kinds": a kind's ``kind.py`` and adapter sit in ``channels/<kind>/``."""
    misplaced = [
        f"{name}: {module}"
        for name, kind in KINDS.items()
        for module in (kind.adapter_module, kind.config.__module__)
        if not module.startswith(f"channels.{name}.")
    ]
    assert misplaced == []
