"""The providers' connection pool (providers/pool.py): over real sockets on 127.0.0.1 through
httpcore, and as a property over any sequence of requests, releases, cancellations and server
closes on httpcore's connection interface."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpcore
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.net_backend import AsyncioBackend
from providers.pool import ConnectionPool
from tests.test_net_backend import read_request, reply, serving


def pool(**kwargs: Any) -> ConnectionPool:
    return ConnectionPool(network_backend=AsyncioBackend(), **kwargs)


class Held:
    """A server answering each request's head at once and its body when released; records
    the request paths in arrival order and the connections open at once."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.open = self.most_open = self.connections = 0
        self.release = asyncio.Event()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.paths.append(head.split(b" ")[1].decode())
                writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                await self.release.wait()
                writer.write(b"1\r\nx\r\n0\r\n\r\n")
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            self.open -= 1


async def fetch(http: httpcore.AsyncConnectionPool, url: str, **extensions: Any) -> bytes:
    async with http.stream("GET", url, extensions=extensions or None) as response:
        return b"".join([part async for part in response.aiter_stream()])


async def test_requests_beyond_max_connections_wait_and_are_served_first_come_first_served() -> (
    None
):
    server = Held()
    async with serving(server) as port, pool(max_connections=2) as http:
        base = f"http://127.0.0.1:{port}"
        tasks = []
        for i in range(6):
            tasks.append(asyncio.ensure_future(fetch(http, f"{base}/{i}")))
            await asyncio.sleep(0.02)  # started in this order
        server.release.set()
        assert await asyncio.gather(*tasks) == [b"x"] * 6
        assert server.paths == [f"/{i}" for i in range(6)]
        assert server.most_open == 2 and server.connections == 2  # the two reused throughout
        assert len(http.connections) == 2 and all(c.is_idle() for c in http.connections)


async def test_a_cancelled_waiting_request_leaves_the_queue() -> None:
    server = Held()
    async with serving(server) as port, pool(max_connections=1) as http:
        base = f"http://127.0.0.1:{port}"
        first = asyncio.ensure_future(fetch(http, f"{base}/first"))
        await asyncio.sleep(0.05)
        waiting = asyncio.ensure_future(fetch(http, f"{base}/cancelled"))
        await asyncio.sleep(0.05)
        waiting.cancel()
        third = asyncio.ensure_future(fetch(http, f"{base}/third"))
        await asyncio.sleep(0.05)
        server.release.set()
        assert list(await asyncio.wait_for(asyncio.gather(first, third), 5)) == [b"x", b"x"]
        assert server.paths == ["/first", "/third"] and len(http.connections) == 1


async def test_a_request_cancelled_after_a_connection_was_assigned_to_it_gives_it_back() -> None:
    # The second request is given the connection when the first one's body closes, and is
    # cancelled before it runs: the connection, never used by it, serves the third request.
    # (httpcore's own pool kept such a connection, neither idle nor closed, for good: with
    # max_connections=1 the third request would wait forever.)
    server = Held()
    server.release.set()
    async with serving(server) as port, pool(max_connections=1) as http:
        base = f"http://127.0.0.1:{port}"
        stream = http.stream("GET", f"{base}/first")
        response = await stream.__aenter__()
        second = asyncio.ensure_future(fetch(http, f"{base}/second"))
        await asyncio.sleep(0.05)  # queued
        await stream.__aexit__(None, None, None)  # the connection is the second's now
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        assert response.status == 200
        assert await asyncio.wait_for(fetch(http, f"{base}/third"), 5) == b"x"
        assert server.paths == ["/first", "/third"]


class SlowConnect(AsyncioBackend):
    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.2)
        return await super().connect_tcp(*args, **kwargs)


async def test_a_request_cancelled_while_connecting_frees_its_place() -> None:
    server = Held()
    server.release.set()
    async with serving(server) as port:
        async with ConnectionPool(network_backend=SlowConnect(), max_connections=1) as http:
            url = f"http://127.0.0.1:{port}/x"
            connecting = asyncio.ensure_future(fetch(http, url))
            await asyncio.sleep(0.05)
            connecting.cancel()
            await asyncio.sleep(0)
            assert http.connections == []
            assert await asyncio.wait_for(fetch(http, url), 5) == b"x"


async def test_a_waiting_request_with_a_pool_timeout_gives_up_and_leaves_the_queue() -> None:
    server = Held()
    async with serving(server) as port, pool(max_connections=1) as http:
        base = f"http://127.0.0.1:{port}"
        first = asyncio.ensure_future(fetch(http, f"{base}/first"))
        await asyncio.sleep(0.05)
        with pytest.raises(httpcore.PoolTimeout):
            await fetch(http, f"{base}/late", timeout={"pool": 0.1})
        server.release.set()
        assert await first == b"x"
        assert await fetch(http, f"{base}/next") == b"x"
        assert server.paths == ["/first", "/next"]


async def test_idle_connections_beyond_max_keepalive_are_closed_and_expired_ones_too() -> None:
    server = Held()
    async with serving(server) as port:
        url = f"http://127.0.0.1:{port}/x"
        async with pool(max_keepalive_connections=2, keepalive_expiry=0.3) as http:
            tasks = [asyncio.ensure_future(fetch(http, url)) for _ in range(5)]
            await asyncio.sleep(0.05)
            server.release.set()
            await asyncio.gather(*tasks)
            assert len(http.connections) == 2  # 3 closed as they came back
            await asyncio.sleep(0.2)
            assert server.open == 2
            await asyncio.sleep(0.3)  # both expired: the next request closes them
            assert await fetch(http, url) == b"x"
            await asyncio.sleep(0.05)
            assert server.connections == 6 and server.open == 1 and len(http.connections) == 1


async def test_at_max_connections_an_idle_connection_to_another_origin_makes_room() -> None:
    one, two = Held(), Held()
    one.release.set()
    two.release.set()
    async with serving(one) as a, serving(two) as b, pool(max_connections=1) as http:
        assert await fetch(http, f"http://127.0.0.1:{a}/a") == b"x"
        assert await fetch(http, f"http://127.0.0.1:{b}/b") == b"x"
        await asyncio.sleep(0.05)
        assert one.open == 0 and two.open == 1 and len(http.connections) == 1


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(reply(b"ok"))  # says keep-alive, then closes
        await writer.drain()
        writer.close()

    async with serving(handler) as port, pool() as http:
        url = f"http://127.0.0.1:{port}/x"
        assert await fetch(http, url) == b"ok"
        await asyncio.sleep(0.05)
        assert await fetch(http, url) == b"ok"
        assert connections == 2


async def test_a_task_cancelled_while_it_closes_a_response_gives_its_connection_back() -> None:
    # Closing a response awaits httpcore's connection lock, a real yield, and anyio's shield
    # does not stop asyncio's Task.cancel() (a /stop, the idle watchdog): the connection must
    # come back even so, or with max_connections=1 every later request waits forever.
    server = Held()
    server.release.set()
    async with serving(server) as port, pool(max_connections=1) as http:
        url = f"http://127.0.0.1:{port}/x"

        async def stopped_while_closing() -> None:
            request = httpcore.Request("GET", url, headers=[(b"host", b"127.0.0.1")])
            response = await http.handle_async_request(request)
            await response.aread()
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await response.aclose()

        with pytest.raises(asyncio.CancelledError):
            await asyncio.ensure_future(stopped_while_closing())
        assert await asyncio.wait_for(fetch(http, url), 5) == b"x"


async def test_a_connection_made_after_the_pool_closed_is_closed_with_its_response() -> None:
    server = Held()
    server.release.set()
    async with serving(server) as port:
        http = ConnectionPool(network_backend=SlowConnect())
        connecting = asyncio.ensure_future(fetch(http, f"http://127.0.0.1:{port}/x"))
        await asyncio.sleep(0.05)
        await http.aclose()  # e.g. the daemon stopping
        assert await connecting == b"x"
        await asyncio.sleep(0.05)
        assert server.open == 0 and http.connections == []


def test_http2_and_proxies_are_refused() -> None:
    with pytest.raises(ValueError):
        ConnectionPool(http2=True)
    with pytest.raises(ValueError):
        ConnectionPool(proxy=httpcore.Proxy("http://127.0.0.1:9"))


# --- the bookkeeping as a property, on httpcore's connection interface -----------------------


class FakeConnection(httpcore.AsyncConnectionInterface):
    """httpcore's connection interface for one HTTP/1.1 connection, its state set by the test:
    ``"new"``, ``"active"``, ``"idle"``, ``"expired"`` (idle, keep-alive ran out or the server
    closed it) or ``"closed"``."""

    def __init__(self, origin: httpcore.Origin, unavailable: bool, log: list[int]) -> None:
        self.origin = origin
        self.log = log  # the ids of the requests it was given, in order
        self.state = "new"
        self.unavailable = unavailable  # refuses its first request (ConnectionNotAvailable)
        self.closed_by_pool = False
        self.requests = 0

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        assert self.state in ("new", "idle"), self.state  # one request at a time
        self.log.append(request.extensions["id"])
        await asyncio.sleep(0)
        if self.unavailable:
            self.unavailable = False
            self.state = "closed"
            raise httpcore.ConnectionNotAvailable()
        self.state = "active"
        self.requests += 1
        body = FakeBody(self)
        return httpcore.Response(200, content=body, extensions={"body": body})

    def can_handle_request(self, origin: httpcore.Origin) -> bool:
        return origin == self.origin

    def is_available(self) -> bool:
        return self.state in ("new", "idle")

    def has_expired(self) -> bool:
        return self.state in ("expired", "closed")

    def is_idle(self) -> bool:
        return self.state in ("idle", "expired")

    def is_closed(self) -> bool:
        return self.state == "closed"

    async def aclose(self) -> None:
        self.closed_by_pool = True
        self.state = "closed"


class FakeBody:
    def __init__(self, connection: FakeConnection) -> None:
        self.connection = connection
        self.keep_alive = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"x"

    async def aclose(self) -> None:
        if self.connection.state == "active":
            self.connection.state = "idle" if self.keep_alive else "closed"


class FakePool(ConnectionPool):
    def __init__(self, unavailable: list[bool], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.made: list[FakeConnection] = []
        self.log: list[int] = []
        self._unavailable = unavailable

    def create_connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        refuse = self._unavailable.pop(0) if self._unavailable else False
        self.made.append(FakeConnection(origin, refuse, self.log))
        return self.made[-1]


ORIGINS = ("http://a.test/", "http://b.test/")
step = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(ORIGINS)),
    st.tuples(st.just("finish"), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("cancel"), st.integers(0, 30)),
    st.tuples(st.just("server closes an idle one"), st.integers(0, 30)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step, max_size=40),
    max_connections=st.integers(1, 4),
    max_keepalive=st.integers(0, 4),
    unavailable=st.lists(st.booleans(), max_size=8),
)
def test_bookkeeping_holds_for_any_sequence(
    steps: list[tuple[Any, ...]], max_connections: int, max_keepalive: int, unavailable: list[bool]
) -> None:
    # After every step: at most max_connections held; each held connection is in use by one
    # request or idle; a request waits only while max_connections are held and none is idle;
    # connections are given first come first served; and what the pool let go of was closed.
    async def run() -> None:
        http = FakePool(
            list(unavailable),
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive,
        )
        tasks: list[asyncio.Task[httpcore.Response]] = []
        responses: dict[int, httpcore.Response] = {}
        finished: set[int] = set()

        async def one(index: int, origin: str) -> httpcore.Response:
            request = httpcore.Request("GET", origin, extensions={"id": index})
            return await http.handle_async_request(request)

        async def settle() -> None:
            for _ in range(50):  # every task as far as it gets without a connection freed
                await asyncio.sleep(0)
            for index, task in enumerate(tasks):
                if task.done() and not task.cancelled() and index not in responses:
                    responses[index] = task.result()

        def check() -> None:
            held = http.connections
            assert len(held) <= max_connections
            in_use = [
                r.extensions["body"].connection for i, r in responses.items() if i not in finished
            ]
            for connection in held:
                assert isinstance(connection, FakeConnection)
                users = sum(c is connection for c in in_use)
                assert users == (1 if connection.state == "active" else 0), connection.state
                assert connection.state != "closed"
            waiting = [t for t in tasks if not t.done()]
            idle = [c for c in held if isinstance(c, FakeConnection) and c.state == "idle"]
            if waiting:
                assert len(held) == max_connections and not idle
            assert sum(c.state == "idle" for c in held if isinstance(c, FakeConnection)) <= max(
                max_keepalive, 0
            )
            for connection in http.made:
                if connection not in held and connection.state not in ("closed",):
                    raise AssertionError(f"let go of a {connection.state} connection unclosed")

        for action, *args in steps:
            if action == "request":
                tasks.append(asyncio.ensure_future(one(len(tasks), args[0])))
            elif action == "finish" and responses:
                index = sorted(responses)[args[0] % len(responses)]
                if index not in finished:
                    finished.add(index)
                    responses[index].extensions["body"].keep_alive = args[1]
                    await responses[index].aclose()
            elif action == "cancel" and tasks:
                tasks[args[0] % len(tasks)].cancel()
            elif action == "server closes an idle one":
                idle = [c for c in http.made if c.state == "idle"]
                if idle:
                    idle[args[0] % len(idle)].state = "expired"
            await settle()
            check()
        firsts = list(dict.fromkeys(http.log))  # each request's first connection, in order
        assert firsts == sorted(firsts)  # first come, first served
        for index in sorted(set(responses) - finished):
            await responses[index].aclose()
        for task in tasks:
            task.cancel()
        await settle()
        held = http.connections
        assert all(c.state in ("idle", "expired") for c in http.made if c in held)

    asyncio.run(run())
