"""The config checks that need the runtime (architecture §6): what ``relaybot run`` would reject
after the schema, found by ``relaybot check-config`` too, in the same pass and at the same
``FILE:LINE`` as schema errors (:mod:`config.checks`).

* ``agent.tools``: every name is a tool this version offers;
* ``policy``: the ``on_message_sending`` hook imports, every ``extra_secret_patterns`` entry and
  every guardrail can be built — each part checked on its own, so one invalid part does not hide
  the problems of the others;
* ``channels``: a warning for each channel whose kind has no adapter in this version (its start
  would fail);
* ``channels``: a warning for each channel whose ``allowed_users`` is absent or empty (nobody
  could talk to it; a refused user is told their id, which the admin adds);
* ``agent.mcp_servers``: a warning for each stdio server whose program is not found (on
  ``PATH``, or as the path given); the server would not start, and the bot runs without its
  tools. An error when servers are named and the ``mcp`` SDK (a dependency of relaybot) cannot
  be imported: a broken installation, which no server could be reached through.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from channels.registry import CHANNEL_CLASSES, KINDS
from config.checks import CheckResult, SectionCheck
from config.errors import Loc
from config.models import GuardrailConfig, PolicyConfig, SecretPatternConfig
from config.tools import McpServers, McpStdioServerConfig
from orchestrator.policy import OutboundPolicy, PolicyError, TermList
from orchestrator.policy.hook import load_hook
from orchestrator.policy.outbound import extra_shapes
from orchestrator.tools.mcp_shapes import mcp_sdk_missing
from orchestrator.tools.registry import ToolRegistry, builtin_tools

__all__ = ["RUN_CHECKS", "available_channel_kinds"]

_Entry = TypeVar("_Entry", bound=BaseModel)


def _tools(names: list[str]) -> CheckResult:
    available = ", ".join(sorted(builtin_tools())) or "none"
    for index, name in enumerate(names):
        try:
            ToolRegistry.from_names([name])
        except KeyError:
            yield (index,), f"unknown tool (available: {available})"


def _hook(path: str | None) -> CheckResult:
    if path:
        try:
            load_hook(path)
        except PolicyError as exc:
            yield (), exc.message


def _valid_entries(entries: list[Any], shape: type[_Entry]) -> Iterator[tuple[int, _Entry]]:
    """The entries of a list that are valid on their own (the schema reports the others)."""
    adapter = TypeAdapter(shape)
    for index, entry in enumerate(entries):
        try:
            yield index, adapter.validate_python(entry)
        except ValidationError:
            continue


def _patterns(patterns: list[Any]) -> CheckResult:
    for index, pattern in _valid_entries(patterns, SecretPatternConfig):
        try:
            extra_shapes([pattern])
        except PolicyError as exc:
            yield (index, *_relative(exc.key)[2:]), exc.message


def _guardrails(guardrails: list[Any]) -> CheckResult:
    for index, guardrail in _valid_entries(guardrails, GuardrailConfig):
        try:
            TermList.from_config(guardrail)
        except ValueError as exc:
            yield (index, "terms"), str(exc)


def _policy(policy: PolicyConfig) -> CheckResult:
    """Anything else the daemon's own construction of a valid section would refuse (what the
    checks of its parts found is not said twice)."""
    parts = (
        list(_hook(policy.on_message_sending))
        or list(_patterns(list(policy.extra_secret_patterns)))
        or list(_guardrails(list(policy.guardrails)))
    )
    if parts:
        return
    try:
        OutboundPolicy.from_config(policy)
    except PolicyError as exc:
        yield _relative(exc.key), exc.message


_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def _relative(key: str) -> Loc:
    """``policy.extra_secret_patterns[0].regex`` → ``("extra_secret_patterns", 0, "regex")``."""
    loc: list[str | int] = []
    for match in _PART.finditer(key):
        name, index = match.groups()
        loc.append(int(index) if index is not None else name)
    return tuple(loc[1:] if loc[:1] == ["policy"] else loc)


def available_channel_kinds() -> frozenset[str]:
    """The channel kinds whose adapter module exists in this version."""
    kinds = set()
    for kind, target in CHANNEL_CLASSES.items():
        module = target.partition(":")[0]
        try:
            if importlib.util.find_spec(module) is not None:
                kinds.add(kind)
        except (ImportError, ValueError):
            continue
    return frozenset(kinds)


def _channels(channels: dict[str, Any]) -> CheckResult:
    available = available_channel_kinds()
    for name, channel in channels.items():
        kind = channel.get("kind") if isinstance(channel, dict) else None
        if isinstance(kind, str) and kind in CHANNEL_CLASSES and kind not in available:
            yield (
                (name, "kind"),
                f"channel kind {kind!r} cannot start in this version (its adapter is not built "
                "yet): relaybot run stops with exit 1",
            )


def _allows_by_default(kind: object) -> bool:
    """Whether channels of ``kind`` have a non-empty ``allowed_users`` when the key is absent
    (the console's user is whoever runs it; the web page and the API have their own sign-in)."""
    found = KINDS.get(kind) if isinstance(kind, str) else None
    field = found.config.model_fields.get("allowed_users") if found is not None else None
    return field is not None and bool(field.get_default(call_default_factory=True))


def _open_to_nobody(channels: dict[str, Any]) -> CheckResult:
    for name, channel in channels.items():
        if not isinstance(channel, dict):
            continue
        if "allowed_users" not in channel and _allows_by_default(channel.get("kind")):
            continue  # the kind lets everyone in by default (the console, the web page, the API)
        if not channel.get("allowed_users"):
            yield (
                (name, "allowed_users"),
                "allowed_users is absent or empty: nobody may talk to this bot. List user ids "
                '(a user who is refused is told theirs) or "*" for everyone',
            )


def _mcp_programs(servers: McpServers) -> CheckResult:
    for name, server in servers.items():
        if isinstance(server, McpStdioServerConfig) and shutil.which(server.command[0]) is None:
            yield (
                (name, "command", 0),
                "program not found: this MCP server would not start (the bot runs without it)",
            )


def _mcp_sdk(servers: McpServers) -> CheckResult:
    if servers and (missing := mcp_sdk_missing()) is not None:
        yield (), missing


RUN_CHECKS: tuple[SectionCheck, ...] = (
    SectionCheck(("agent", "tools"), list[str], _tools),
    SectionCheck(("policy", "on_message_sending"), str | None, _hook),
    SectionCheck(("policy", "extra_secret_patterns"), list[Any], _patterns),
    SectionCheck(("policy", "guardrails"), list[Any], _guardrails),
    SectionCheck(("policy",), PolicyConfig, _policy),
    SectionCheck(("channels",), dict[str, Any], _channels, warning=True),
    SectionCheck(("channels",), dict[str, Any], _open_to_nobody, warning=True),
    SectionCheck(("agent", "mcp_servers"), McpServers, _mcp_sdk),
    SectionCheck(("agent", "mcp_servers"), McpServers, _mcp_programs, warning=True),
)
"""The checks ``relaybot check-config`` and ``relaybot run`` pass to the loader."""
