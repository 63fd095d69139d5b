"""One round's tool calls (architecture §5 "Tools"): guard, status, approval, run, results.

Theory of operation
-------------------
The calls of a round are taken in content order. Each is first checked by the turn's
:class:`~orchestrator.tools.tool_calls.RepeatGuard` (a third identical call, or a tool not offered,
gets a tool error and does not run). Every call shows its own status line
(:mod:`orchestrator.tools.tool_status`, redacted by the reply's policy): ``⏳ name…`` as it starts,
then ``✓ name 0.4 s`` (how long the run took) or ``✗ name: cause`` when it ends — a refused
call, a denied or unanswered approval, a timeout, a tool error (an MCP error included) and a
turn stopped meanwhile are ``✗``. A refused call's line is finished at once.

When no call of the round needs approval (``agent.require_approval``: names or ``"*"``) they
all run at once, in one task group; otherwise they run one after the other, each asking first
where it must. Either way the results are returned in the calls' order, so each result is paired
with its call in content order.

**Approvals.** Before the prompt the narration and the status lines so far are delivered,
and the prompt waits for the chat's spacing after the last of them
(:meth:`~orchestrator.delivery.driver.DeliveryDriver.write_elsewhere`); the reply's next write
is spaced from the prompt's outcome in turn. The prompt shows the tool and its
arguments, redacted by the policy (then cut to :data:`PROMPT_ARGUMENTS_CHARS`). The channel answers
True (approved), False (denied) or None (nobody answered within ``approval_timeout_secs``; a
channel that cannot ask answers None at once); the turn bounds the wait too, a second past the
channel's bound. A call not approved does not run, and the model is told plainly which it was:
:func:`denied_error` or :func:`unanswered_error`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from channels.base import WriteSpacing
from config.models import AgentConfig
from config.tools import requires_approval
from orchestrator.delivery.events import ToolFinished, ToolStarted
from orchestrator.tools.registry import ToolRegistry, ToolResult, tool_error
from orchestrator.tools.tool_calls import RepeatGuard
from orchestrator.tools.tool_status import (
    DENIED_CAUSE,
    REPEATED_CAUSE,
    STOPPED_CAUSE,
    UNANSWERED_CAUSE,
    UNKNOWN_CAUSE,
    done_line,
    failed_line,
    running_line,
)
from orchestrator.turn.turn_state import TurnState
from providers.base import ChatMessage
from providers.events import ToolCall

__all__ = [
    "PROMPT_ARGUMENTS_CHARS",
    "ToolTurn",
    "denied_error",
    "run_calls",
    "unanswered_error",
]

log = logging.getLogger(__name__)

PROMPT_ARGUMENTS_CHARS = 1000
"""The arguments shown in an approval prompt, at most (characters; the rest is cut)."""

APPROVAL_GRACE_SECS = 1.0
"""How much longer than ``approval_timeout_secs`` the turn waits for a channel's answer."""


def denied_error(name: str) -> str:
    return tool_error(
        f"the user denied this call of {name}; it was not run. Do not call it again in this "
        "request unless the user asks for it."
    )


def unanswered_error(name: str, timeout_secs: float) -> str:
    return tool_error(
        f"nobody answered the request to approve this call of {name} within "
        f"{timeout_secs:g} s, so it was not run (the user did not deny it)."
    )


@dataclass
class ToolTurn:
    """What a turn's rounds of tool calls share: the repeat guard and the MCP servers the turn
    restarted already (each at most once)."""

    guard: RepeatGuard = field(default_factory=RepeatGuard)
    restarted: set[str] = field(default_factory=set)


async def run_calls(
    turn: TurnState,
    calls: Sequence[ToolCall],
    *,
    agent: AgentConfig,
    tools: ToolRegistry,
    state: ToolTurn,
) -> list[ChatMessage]:
    """Run a round's ``calls``; their ``tool`` messages in the calls' order."""
    offered = {spec.name for spec in tools.specs}
    refusals = [state.guard.refusal(call, offered) for call in calls]
    results = [None if refusal is None else tool_error(refusal) for refusal in refusals]
    runnable = [i for i, refusal in enumerate(refusals) if refusal is None]
    asks = [requires_approval(agent.require_approval, calls[i].name) for i in runnable]
    numbers: dict[int, int] = {}

    def started(index: int) -> None:
        numbers[index] = next(turn.call_numbers)
        status = turn.policy.redact_line(running_line(calls[index].name))
        turn.driver.feed(ToolStarted(numbers[index], status))
        if refusals[index] is not None:  # refused: it does not run, its line ends at once
            cause = UNKNOWN_CAUSE if calls[index].name not in offered else REPEATED_CAUSE
            finished(index, failed_line(calls[index].name, cause, turn.policy.redact_line))

    def finished(index: int, line: str) -> None:
        turn.driver.feed(ToolFinished(numbers[index], turn.policy.redact_line(line)))

    async def one(index: int, ask: bool) -> None:
        line = failed_line(calls[index].name, STOPPED_CAUSE, turn.policy.redact_line)
        try:
            outcome, line = await _approved_run(turn, calls[index], ask, agent, tools, state)
            results[index] = outcome.text
        finally:
            finished(index, line)

    if any(asks):
        for index in range(len(calls)):
            started(index)
            if refusals[index] is None:
                await one(index, asks[runnable.index(index)])
    else:
        for index in range(len(calls)):  # every line shows, in content order, before any runs
            started(index)
        async with anyio.create_task_group() as tg:
            for index in runnable:
                tg.start_soon(one, index, False)
    out: list[ChatMessage] = []
    for call, result in zip(calls, results, strict=True):
        assert result is not None
        out.append(ChatMessage("tool", result, tool_call_id=call.id, name=call.name))
    return out


async def _approved_run(
    turn: TurnState,
    call: ToolCall,
    ask: bool,
    agent: AgentConfig,
    tools: ToolRegistry,
    state: ToolTurn,
) -> tuple[ToolResult, str]:
    """The call's outcome and its finished status line (not yet redacted)."""
    if ask:
        answer = await _ask(turn, call, agent.approval_timeout_secs)
        if answer is not True:
            log.info("tool %s not approved in %s: %s", call.name, turn.where, answer)
            redact = turn.policy.redact_line
            if answer is False:
                return ToolResult(denied_error(call.name)), failed_line(
                    call.name, DENIED_CAUSE, redact
                )
            text = unanswered_error(call.name, agent.approval_timeout_secs)
            return ToolResult(text), failed_line(call.name, UNANSWERED_CAUSE, redact)
    began = anyio.current_time()
    outcome = await tools.call(call.name, call.arguments, restarted=state.restarted)
    if outcome.cause is not None:
        return outcome, failed_line(call.name, outcome.cause, turn.policy.redact_line)
    return outcome, done_line(call.name, anyio.current_time() - began)


async def _ask(turn: TurnState, call: ToolCall, timeout_secs: float) -> bool | None:
    # Redacted whole, then cut: a cut first could leave a secret's prefix the policy no longer
    # recognises.
    shown = turn.policy.redact_line(call.arguments)
    if len(shown) > PROMPT_ARGUMENTS_CHARS:
        shown = shown[:PROMPT_ARGUMENTS_CHARS] + "…"
    prompt = turn.policy.redact_line(f"Run {call.name} with {shown}?")
    inbound = turn.inbound

    async def request(spacing: WriteSpacing) -> bool | None:
        with anyio.move_on_after(timeout_secs + APPROVAL_GRACE_SECS):
            return await turn.channel.request_approval(
                inbound.chat_id, prompt, thread_id=inbound.thread_id, spacing=spacing
            )
        return None

    # The narration and status lines come before the prompt, which keeps the chat's spacing.
    return await turn.driver.write_elsewhere(request)
