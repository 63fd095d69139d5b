"""``docs/extending.md`` followed word for word: a toy channel kind is one folder and one
registry line (architecture §3 "Kinds").

The test copies the packages into a temporary tree, writes the guide's code blocks there (each
block opens with ``# <path>``), adds the guide's registry line, and checks that nothing else
changed. Then, in that tree (as subprocesses, so the copy's registry is the one loaded): the
config with a ``kind: toy`` channel passes ``check-config`` and a wrong key is named with its
line, the JSON Schema and the capability table list the kind, the architecture tests check the
new adapter, and ``relaybot run`` answers a message typed on a Toy server (a JSON-lines peer on
127.0.0.1) with the provider server's answer, then exits 0 on SIGTERM.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.channel_harness import PATH, daemon_config
from tests.ops_harness import BotProcess, env
from tests.peers.provider_server import ProviderServer
from tests.telegram_harness import reply, text_stream

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "extending.md"
PACKAGES = ("channels", "config", "orchestrator", "providers")
REGISTRY = "channels/registry.py"
ANSWER = "Hello from the toy channel."
ARCHITECTURE_TESTS = ("tests/test_architecture.py", "-k", "adapter or kind or config_loads")
"""The architecture tests that read the registry's kinds."""


def guide_blocks() -> dict[str, str]:
    """The guide's Python blocks that open with ``# <path>``: path → the rest of the block."""
    blocks = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), re.S | re.M)
    found = {}
    for block in blocks:
        first, _, rest = block.partition("\n")
        if first.startswith("# channels/"):
            found[first.removeprefix("# ")] = rest
    return found


def follow_the_guide(tree: Path) -> None:
    """Write the guide's files into ``tree`` and add its registry line."""
    blocks = guide_blocks()
    registry_line = blocks.pop(f"{REGISTRY}: KIND_MODULES")
    for path, text in blocks.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    registry = tree / REGISTRY
    head, sep, tail = registry.read_text().partition("KIND_MODULES: tuple[str, ...] = (\n")
    entries, close, rest = tail.partition(")\n")
    registry.write_text(head + sep + entries + registry_line + close + rest)


def source_files(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text()
        for package in PACKAGES
        for path in (root / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the packages with the toy kind added as the guide says."""
    root = tmp_path_factory.mktemp("extended")
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (root / "tests").mkdir()
    for name in ("__init__.py", "test_architecture.py"):
        shutil.copy(REPO / "tests" / name, root / "tests" / name)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    follow_the_guide(root)
    return root


def run(tree: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env(tmp_path, source=tree),
        timeout=300,
    )


def toy_config(tmp_path: Path, provider_url: str, port: int, extra: str = "") -> Path:
    channel = f"""\
  chat:
    kind: toy
    address: "127.0.0.1:{port}"
    stream_mode: partial
    draft_update_interval_ms: 100
    allowed_users: ["*"]
{extra}"""
    path = tmp_path / "toy.yaml"
    path.write_text(daemon_config(provider_url, tmp_path, channel, tools="[]"))
    return path


def test_the_guide_touches_its_folder_and_one_registry_line(tree: Path) -> None:
    before, after = source_files(REPO), source_files(tree)
    added = sorted(set(after) - set(before))
    changed = sorted(p for p in set(after) & set(before) if after[p] != before[p])
    assert added == ["channels/toy/__init__.py", "channels/toy/adapter.py", "channels/toy/kind.py"]
    assert changed == [REGISTRY]
    diff = [
        line
        for line in difflib.unified_diff(
            before[REGISTRY].splitlines(), after[REGISTRY].splitlines(), n=0, lineterm=""
        )
        if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    assert diff == ['+    "channels.toy.kind",']


def test_the_guides_code_is_lint_clean(tree: Path, tmp_path: Path) -> None:
    for check in (("check",), ("format", "--check")):
        result = run(tree, tmp_path, "-m", "ruff", *check, str(tree / "channels" / "toy"))
        assert result.returncode == 0, result.stdout


def test_the_toy_kind_passes_check_config(tree: Path, tmp_path: Path) -> None:
    config = toy_config(tmp_path, "http://127.0.0.1:9", 9)
    result = run(tree, tmp_path, "-m", "orchestrator.cli", "check-config", str(config))
    assert (result.returncode, result.stdout.strip()) == (0, f"{config}: ok"), result.stderr
    wrong = toy_config(tmp_path, "http://127.0.0.1:9", 9, extra="    adress: x\n")
    result = run(tree, tmp_path, "-m", "orchestrator.cli", "check-config", str(wrong))
    assert result.returncode == 2
    assert re.search(r"toy\.yaml:\d+: channels\.chat\.adress: unknown key", result.stderr)


def test_the_schema_and_the_table_list_the_toy_kind(tree: Path, tmp_path: Path) -> None:
    schema = json.loads(run(tree, tmp_path, "-m", "config.schema").stdout)
    assert schema["$defs"]["ToyChannelConfig"]["properties"]["kind"]["const"] == "toy"
    table = run(tree, tmp_path, "-m", "config.schema", "--table").stdout
    assert "| `toy` | `stream_mode`: `off`, `partial`, `multi_message` |" in table
    assert table.rstrip().endswith("| 1000 characters |")


def test_the_architecture_tests_check_the_toy_adapter(tree: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *ARCHITECTURE_TESTS],
        capture_output=True,
        text=True,
        cwd=tree,
        env=env(tmp_path, source=tree),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout
    assert "test_no_adapter_splits_text[channels/toy/adapter.py] PASSED" in result.stdout


class ToyServer:
    """A Toy chat server on 127.0.0.1: one client; :meth:`say` sends a user's message, and
    :attr:`shown` is what each message of the bot shows (sends and edits applied, deletions
    removed), by message id."""

    def __init__(self) -> None:
        self.port = 0
        self.ops: list[dict[str, Any]] = []
        self.shown: dict[str, str] = {}
        self._client: asyncio.StreamWriter | None = None
        self._connected = asyncio.Event()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._client = writer
        self._connected.set()
        while line := await reader.readline():
            op = json.loads(line)
            self.ops.append(op)
            if op["op"] in ("send", "edit"):
                self.shown[op["id"]] = op["text"]
            elif op["op"] == "delete":
                self.shown.pop(op["id"], None)

    async def say(self, chat: str, user: str, text: str) -> None:
        await asyncio.wait_for(self._connected.wait(), 30)
        assert self._client is not None
        self._client.write((json.dumps({"chat": chat, "user": user, "text": text}) + "\n").encode())
        await self._client.drain()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ToyServer]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        async with server:
            yield self
            if self._client is not None:
                self._client.close()


async def test_the_toy_channel_delivers_an_answer(tree: Path, tmp_path: Path) -> None:
    async with ToyServer().running() as toy, ProviderServer() as provider:
        provider.script(PATH, [reply(text_stream(["Hello ", "from the ", "toy channel."]))])
        config = toy_config(tmp_path, provider.url, toy.port)
        async with BotProcess(tmp_path, config, source=tree) as bot:
            await toy.say("42", "alice", "hi")
            await bot.wait_for(lambda: ANSWER in toy.shown.values())
            bot.signal(signal.SIGTERM)
            assert await bot.finish() == 0, bot.err
    assert list(toy.shown.values()) == [ANSWER]
    assert {op["chat"] for op in toy.ops} == {"42"}
    assert provider.requests[0].json["messages"][-1] == {"role": "user", "content": "hi"}
