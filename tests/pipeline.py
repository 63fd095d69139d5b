"""A full reply pipeline for tests: local provider servers, a recording channel, a real store,
the real outbound policy, round runner, turn loop and delivery driver."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config.models import AgentConfig, PolicyConfig, ProviderConfig, RelaybotConfig
from orchestrator.policy import OutboundPolicy
from orchestrator.store import Store
from orchestrator.tools.registry import Tool, ToolRegistry, builtin_tools
from orchestrator.turn.round_sink import ReplyPolicyFactory
from orchestrator.turn.rounds import ChainEntry, RoundRunner
from orchestrator.turn.runner import TurnRunner
from providers.registry import build_provider
from tests.peers.provider_server import ProviderServer, Reply

__all__ = [
    "RecordingTools",
    "chain_config",
    "completion",
    "make_turns",
    "provider_config",
    "sse",
    "text_answer",
    "tool_call_stream",
]


def chain_config(
    server: ProviderServer, agent: Mapping[str, Any] | None = None, **overrides: Any
) -> RelaybotConfig:
    """A whole config: one provider ``small`` on ``server`` (:func:`provider_config` with
    ``overrides``, its key given), the agent on it (with ``agent``'s settings), a console."""
    settings = provider_config(server, **overrides).model_dump(mode="json")
    settings["api_key"] = "sk-test-key"
    return RelaybotConfig.model_validate(
        {
            "providers": {"small": settings},
            "agent": {"providers": ["small"], **(agent or {})},
            "channels": {"term": {"kind": "console"}},
        }
    )


def sse(*payloads: Any) -> bytes:
    """An SSE body: one ``data:`` event per payload (dicts as JSON, strings as they are)."""
    out = b""
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out += b"data: " + data.encode() + b"\n\n"
    return out


def text_answer(text: str, *, words: bool = True) -> bytes:
    """A Chat Completions stream answering ``text`` (word by word), finish ``stop``, ``[DONE]``."""
    pieces = text.split(" ") if words else [text]
    chunks: list[Any] = [
        {"choices": [{"index": 0, "delta": {"content": p + (" " if i < len(pieces) - 1 else "")}}]}
        for i, p in enumerate(pieces)
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    chunks.append({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5}})
    return sse(*chunks, "[DONE]")


def completion(text: str) -> Reply:
    """A Chat Completions JSON answer (not streamed): ``text``, finish ``stop``, 7 + 3 tokens."""
    return Reply.json(
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3},
        }
    )


def tool_call_stream(
    name: str, arguments: str, call_id: str = "c", *, narration: str = ""
) -> bytes:
    """A Chat Completions stream: optional narration, one tool call, finish ``tool_calls``,
    ``[DONE]``."""
    call = {"index": 0, "id": call_id, "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    text = [{"choices": [{"index": 0, "delta": {"content": narration}}]}] if narration else []
    return sse(
        *text,
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    )


class RecordingTools:
    """The built-in tools, recording every call's parsed arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        tools: dict[str, Tool] = {}
        for name, tool in builtin_tools().items():
            tools[name] = Tool(tool.spec, self._recorder(name, tool))
        self.registry = ToolRegistry(tools)

    def _recorder(self, name: str, tool: Tool):  # type: ignore[no-untyped-def]
        async def run(arguments: Mapping[str, Any]) -> str:
            self.calls.append((name, dict(arguments)))
            return await tool.run(arguments)

        return run


def provider_config(
    server: ProviderServer, prefix: str = "/v1", **overrides: Any
) -> ProviderConfig:
    values: dict[str, Any] = {
        "kind": "openai_chat",
        "base_url": server.url + prefix,
        "api_key": "sk-test-key",
        "model": "m",
    }
    values.update(overrides)
    return ProviderConfig(**values)


_MADE: list[ChainEntry] = []
"""The providers :func:`make_turns` built (and those given to :func:`closed_after_test`), until
:func:`close_made_providers` closes them."""


def closed_after_test(entry: ChainEntry) -> ChainEntry:
    """``entry``, its provider closed after the test by :func:`close_made_providers` (as the
    providers :func:`make_turns` builds are)."""
    _MADE.append(entry)
    return entry


async def close_made_providers() -> None:
    """Close the providers :func:`make_turns` built (their HTTP clients' sessions): the
    ``closes_providers`` fixture of tests/conftest.py, after each test of a module that uses
    it."""
    while _MADE:
        await _MADE.pop().provider.aclose()


def make_turns(
    tmp_path: Path,
    providers: list[ProviderConfig],
    *,
    tools: ToolRegistry | None = None,
    policy: PolicyConfig | None = None,
    policies: ReplyPolicyFactory | None = None,
    sleep: Any = None,
    **agent: Any,
) -> tuple[TurnRunner, Store]:
    """The turn loop over ``providers`` (named ``p0``, ``p1``…) and a store in ``tmp_path``;
    each reply's policy comes from ``policies``, default: the outbound policy of ``policy``."""
    chain = [
        closed_after_test(ChainEntry(build_provider(f"p{i}", cfg), cfg))
        for i, cfg in enumerate(providers)
    ]
    store = Store(tmp_path / "relaybot.db")
    runner = RoundRunner(chain, sleep=sleep) if sleep else RoundRunner(chain)
    turns = TurnRunner(
        agent=AgentConfig(providers=[f"p{i}" for i in range(len(providers))], **agent),
        rounds=runner,
        tools=tools or ToolRegistry.from_names(["current_time"]),
        store=store,
        policies=policies or OutboundPolicy.from_config(policy or PolicyConfig()),
    )
    return turns, store
