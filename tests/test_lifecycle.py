"""The channel supervisor (architecture §7): transient start failures and lost connections are
retried with backoff, permanent ones are not, the health says which. A channel of the seam's own
kind whose start and serve fail on cue; the wire-level behaviour is in test_operations_e2e."""

from __future__ import annotations

import anyio

from channels.base import Channel, MessageRef
from channels.errors import ChannelStartError, ChannelUnavailable
from orchestrator.ops.lifecycle import ChannelSupervisor


class CuedChannel(Channel):
    """Fails ``start`` with the queued errors, then starts; ``serve`` raises the queued errors
    (one per serve), then waits until stopped."""

    def __init__(
        self, start_errors: list[Exception], serve_errors: list[Exception] | None = None
    ) -> None:
        super().__init__("cued", None, _ignore)
        self.start_errors = start_errors
        self.serve_errors = serve_errors or []
        self.starts = 0
        self.stops = 0

    async def start(self) -> None:
        self.starts += 1
        if self.start_errors:
            raise self.start_errors.pop(0)

    async def stop(self) -> None:
        self.stops += 1

    async def serve(self) -> None:
        if self.serve_errors:
            raise self.serve_errors.pop(0)
        await anyio.sleep_forever()

    async def _send_message(self, *args: object, **kwargs: object) -> MessageRef:
        raise NotImplementedError

    async def _edit_message(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError

    async def _delete_message(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError


async def _ignore(message: object) -> None:
    return None


async def _until(predicate: object, within: float = 5.0) -> None:
    assert callable(predicate)
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 - states change without an event
            await anyio.sleep(0.005)


async def test_a_transient_start_failure_is_retried_until_the_channel_is_up() -> None:
    channel = CuedChannel([ChannelStartError("cannot reach the server"), OSError("refused")])
    restarts: list[str] = []
    supervisor = ChannelSupervisor(channel, on_restart=restarts.append, first_retry_secs=0.02)
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.run)
        assert supervisor.state == "retrying" and not supervisor.ever_up
        health = supervisor.health()
        assert health.state == "degraded" and health.reason is not None
        assert health.reason.startswith("cannot reach the server; retrying in")
        await _until(lambda: supervisor.up)
        assert channel.starts == 3 and restarts == ["cued", "cued"]
        assert supervisor.health().state == "ok"
        await supervisor.stop()
    assert channel.stops == 1


async def test_a_permanent_start_failure_is_not_retried() -> None:
    channel = CuedChannel([ChannelStartError("invalid token (401 Unauthorized)", permanent=True)])
    supervisor = ChannelSupervisor(channel, first_retry_secs=0.01)
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.run)
        await anyio.sleep(0.1)
        assert supervisor.state == "failed" and channel.starts == 1
        assert supervisor.health().reason == "cannot start: invalid token (401 Unauthorized)"
        await supervisor.stop()
    assert channel.stops == 0  # it never started


async def test_a_lost_connection_stops_and_starts_the_channel_again() -> None:
    channel = CuedChannel([], [ChannelUnavailable("connection reset")])
    supervisor = ChannelSupervisor(channel, first_retry_secs=0.02)
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.run)
        await _until(lambda: channel.starts == 2 and supervisor.up)
        assert channel.stops == 1  # stopped before starting again
        await supervisor.stop()
    assert channel.stops == 2


async def test_the_end_of_input_ends_the_supervisor() -> None:
    ended: list[str] = []

    class Finite(CuedChannel):
        async def serve(self) -> None:
            return None

    channel = Finite([])
    supervisor = ChannelSupervisor(channel, on_input_ended=lambda c: ended.append(c.name))
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.run)
    assert ended == ["cued"] and supervisor.state == "ended" and channel.starts == 1
