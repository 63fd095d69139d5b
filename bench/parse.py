"""Parse throughput: µs of CPU per stream event, our providers against the vendor SDKs.

Each measurement is a fresh client process (pinned to one core with ``taskset`` when there is
one) reading one ``n``-delta stream from the loopback server (:mod:`bench.server`, pinned to
the other core), one SSE event per HTTP chunk, after a 200-delta warm-up stream on the same
client (so imports and the first connection are not counted). The figure is the client
process's CPU time (``time.process_time``, not wall time: the machine is shared) divided by
the events of the stream. Clients are alternated (the order rotates every run), ``runs`` runs
each; medians are reported, and the ratios SDK/ours (``openai_ratio``, ``anthropic_ratio``;
above 1 means ours spends less).

Clients: ``ours_openai_chat``, ``ours_anthropic``, ``ours_openai_responses``, ``ours_ollama``
(``build_provider`` + ``stream``), ``sdk_openai`` (``AsyncOpenAI().chat.completions.create(
stream=True)``), ``sdk_anthropic`` (``AsyncAnthropic().messages.create(stream=True)``), and
``ours_openai_chat_uvloop`` (ours on uvloop, trickled only), ``ours_openai_chat_joined`` and
``ours_anthropic_joined`` (ours iterating ``stream.joined()``: each read's text one delta,
architecture §2 "Events"; burst only), and the floor: ``floor_openai_chat``
and ``floor_anthropic``, a 20-line aiohttp + orjson reader (lines of ``response.content``,
``data:`` payloads parsed, the text picked; no typed errors, idle bound or proxies), checked to
read the exact text (``openai_floor_ratio``, ``anthropic_floor_ratio``: ours / floor, at or
below 1 means at the floor; ``trickle_openai_floor_ratio``, ``trickle_anthropic_floor_ratio``
the same trickled). The trickled runs send one event
per 0.5 ms (the cost of a wakeup per event, as a real model's pace gives).

Also measured in-process: ``json.loads``, ``orjson.loads``, msgspec and ``json_fast`` on the same
Chat Completions and Anthropic event payloads (the decode's JSON share).

Usage: ``python -m bench.parse [--events 5000] [--runs 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from bench.args import decimal
from bench.streams import deltas, events

__all__ = ["main", "measure", "running_server"]

ROOT = Path(__file__).resolve().parents[1]
BURST_CLIENTS = (
    "ours_openai_chat",
    "sdk_openai",
    "floor_openai_chat",
    "ours_anthropic",
    "sdk_anthropic",
    "floor_anthropic",
    "ours_openai_responses",
    "ours_ollama",
    "ours_openai_chat_joined",
    "ours_anthropic_joined",
)
TRICKLE_CLIENTS = (
    "ours_openai_chat",
    "sdk_openai",
    "floor_openai_chat",
    "ours_anthropic",
    "sdk_anthropic",
    "floor_anthropic",
    "ours_openai_chat_uvloop",
)
_FRAMING_EVENTS = {"openai_chat": 4, "anthropic": 6, "openai_responses": 4, "ollama": 1}
_RATIOS = {
    "openai_ratio": ("sdk_openai", "ours_openai_chat"),
    "anthropic_ratio": ("sdk_anthropic", "ours_anthropic"),
    "openai_floor_ratio": ("ours_openai_chat", "floor_openai_chat"),
    "anthropic_floor_ratio": ("ours_anthropic", "floor_anthropic"),
    "trickle_openai_ratio": ("trickle_sdk_openai", "trickle_ours_openai_chat"),
    "trickle_anthropic_ratio": ("trickle_sdk_anthropic", "trickle_ours_anthropic"),
    "trickle_openai_floor_ratio": ("trickle_ours_openai_chat", "trickle_floor_openai_chat"),
    "trickle_anthropic_floor_ratio": ("trickle_ours_anthropic", "trickle_floor_anthropic"),
    "joined_openai_floor_ratio": ("ours_openai_chat_joined", "floor_openai_chat"),
    "joined_anthropic_floor_ratio": ("ours_anthropic_joined", "floor_anthropic"),
}
"""Each ratio of the summary: (numerator, denominator), figures of the same run."""


def _pin(core: int) -> list[str]:
    return ["taskset", "-c", str(core)] if shutil.which("taskset") else []


@contextlib.contextmanager
def running_server(core: int = 0) -> Iterator[str]:
    """A :mod:`bench.server` process; yields its base URL."""
    proc = subprocess.Popen(
        [*_pin(core), sys.executable, "-m", "bench.server"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"bench server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the client process ---------------------------------------------------------------------


def _format_of(client: str) -> str:
    client = client.removesuffix("_joined")
    if "openai_chat" in client or client == "sdk_openai":
        return "openai_chat"
    if "anthropic" in client:
        return "anthropic"
    return client.removeprefix("ours_")


def _floor_reader(client: str, url: str) -> Callable[[str], Awaitable[int]]:
    """The floor: a 20-line aiohttp + orjson SSE reader (no typed errors, no idle bound, no
    proxy, no reducer beyond picking the text), which checks that it read the exact text."""
    import aiohttp
    import orjson

    anthropic = client == "floor_anthropic"
    path = "/v1/messages" if anthropic else "/v1/chat/completions"
    session: list[aiohttp.ClientSession] = []

    async def read_floor(model: str) -> int:
        if not session:
            session.append(aiohttp.ClientSession())
        body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        seen, text = 0, []
        async with session[0].post(url + path, json=body) as response:
            pending = b""
            async for chunk in response.content.iter_any():
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if not line.startswith(b"data: {"):
                        continue
                    event = orjson.loads(line[6:])
                    seen += 1
                    if anthropic:
                        if event["type"] == "content_block_delta":
                            text.append(event["delta"]["text"])
                    elif event["choices"] and (got := event["choices"][0]["delta"].get("content")):
                        text.append(got)
        if "".join(text) != "".join(deltas(int(model.split(":")[1]))):
            raise RuntimeError(f"{client} read a different text")
        return seen

    return read_floor


def _make_reader(client: str, url: str) -> Callable[[str], Awaitable[int]]:
    """``read(model) -> events seen``, for one client kind, reusing one connection pool."""
    if client.startswith("floor_"):
        return _floor_reader(client, url)
    if client == "sdk_openai":
        import openai

        sdk = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)

        async def read_openai(model: str) -> int:
            seen = 0
            stream = await sdk.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for _ in stream:
                seen += 1
            return seen

        return read_openai
    if client == "sdk_anthropic":
        import anthropic

        sdk_a = anthropic.AsyncAnthropic(base_url=url, api_key="sk-bench", max_retries=0)

        async def read_anthropic(model: str) -> int:
            seen = 0
            stream = await sdk_a.messages.create(
                model=model,
                max_tokens=1024,
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
            )
            async for _ in stream:
                seen += 1
            return seen

        return read_anthropic

    from config.models import ProviderConfig
    from providers.base import ChatMessage, ChatRequest
    from providers.registry import build_provider

    fmt = _format_of(client.removesuffix("_joined"))
    base = url if fmt == "ollama" else url + "/v1"
    request = ChatRequest(messages=(ChatMessage("user", "hi"),))
    joined = client.endswith("_joined")

    async def read_ours(model: str) -> int:
        config = ProviderConfig(kind=fmt, base_url=base, api_key="sk-bench", model=model)  # type: ignore[arg-type]
        provider = read_ours.provider  # type: ignore[attr-defined]
        if provider is None:
            provider = read_ours.provider = build_provider("bench", config)  # type: ignore[attr-defined]
        provider.config = config
        seen = 0
        stream = provider.stream(request)
        async for _ in stream.joined() if joined else stream:
            seen += 1
        return seen

    read_ours.provider = None  # type: ignore[attr-defined]
    return read_ours


async def _client_run(client: str, url: str, n: int, gap_us: int) -> dict[str, float]:
    read = _make_reader(client, url)
    await read("bench:200:0:0")  # warm-up: imports, the connection, the first decode
    fmt = _format_of(client)
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    seen = await read(f"bench:{n}:{gap_us}:0")
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
    sent = n + _FRAMING_EVENTS[fmt]
    return {"cpu_us_per_event": cpu / sent * 1e6, "wall_s": wall, "seen": seen, "sent": sent}


def client_main(argv: list[str]) -> int:
    """The client process: measure one stream, print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=decimal, default=5000)
    parser.add_argument("--gap-us", type=decimal, default=0)
    args = parser.parse_args(argv)
    coro = _client_run(args.client, args.url, args.events, args.gap_us)
    if args.client.endswith("_uvloop"):
        import uvloop

        result = uvloop.run(coro)
    else:
        result = asyncio.run(coro)
    print(json.dumps(result))
    return 0


# -- the orchestration ----------------------------------------------------------------------


def measure(
    url: str, clients: tuple[str, ...], n: int, runs: int, gap_us: int = 0, core: int = 1
) -> dict[str, list[float]]:
    """µs CPU per event of each client, ``runs`` fresh processes each, order rotated per run."""
    results: dict[str, list[float]] = {c: [] for c in clients}
    for run in range(runs):
        order = clients[run % len(clients) :] + clients[: run % len(clients)]
        for client in order:
            out = subprocess.run(
                [*_pin(core), sys.executable, "-m", "bench.parse", "--client", client,
                 "--url", url, "--events", str(n), "--gap-us", str(gap_us)],
                cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
            )  # fmt: skip
            if out.returncode != 0:
                raise RuntimeError(f"{client} failed:\n{out.stderr[-2000:]}")
            results[client].append(
                json.loads(out.stdout.strip().splitlines()[-1])["cpu_us_per_event"]
            )
    return results


def _json_decode_costs(n: int) -> dict[str, float]:
    """µs per event of ``json.loads``, ``orjson.loads``, msgspec's decoder and the seam
    (``providers.json_fast.loads``) on the data lines of two formats; a parser that is not
    installed is left out."""
    from providers.json_fast import loads as seam

    out: dict[str, float] = {}
    candidates: list[tuple[str, Callable[[str], object]]] = [("json", json.loads)]
    try:
        import orjson
    except ImportError:
        pass
    else:
        candidates.append(("orjson", orjson.loads))
    try:
        import msgspec
    except ImportError:
        pass
    else:
        candidates.append(("msgspec", msgspec.json.Decoder().decode))
    candidates.append(("json_fast", seam))
    for fmt in ("openai_chat", "anthropic"):
        lines = [
            line[6:]
            for event in events(fmt, n)
            for line in event.decode().split("\n")
            if line.startswith("data: {")
        ]
        for name, loads in candidates:
            best = float("inf")
            for _ in range(5):
                start = time.process_time()
                for line in lines:
                    loads(line)
                best = min(best, time.process_time() - start)
            out[f"{name}_{fmt}"] = best / len(lines) * 1e6
    return out


def run(
    n: int = 5000, runs: int = 5, trickle_n: int = 1000, trickle_runs: int = 3
) -> dict[str, float]:
    """The whole parse section; returns the summary figures (µs per event and ratios)."""
    with running_server() as url:
        burst = measure(url, BURST_CLIENTS, n, runs)
        trickle = measure(url, TRICKLE_CLIENTS, trickle_n, trickle_runs, gap_us=500)
    summary: dict[str, float] = {}
    print(f"parse: µs CPU per event, median of {runs} fresh processes ({n} events, burst)")
    for client, values in burst.items():
        summary[client] = statistics.median(values)
        spread = " ".join(f"{v:.1f}" for v in values)
        print(f"  {client:26} {summary[client]:7.1f}   runs: {spread}")
    print(f"parse: trickled, one event per 0.5 ms ({trickle_n} events, median of {trickle_runs})")
    for client, values in trickle.items():
        summary[f"trickle_{client}"] = statistics.median(values)
        print(f"  {client:26} {summary[f'trickle_{client}']:7.1f}")
    for name, (top, bottom) in _RATIOS.items():
        summary[name] = summary[top] / summary[bottom]
    print(
        f"openai_ratio={summary['openai_ratio']:.2f} "
        f"anthropic_ratio={summary['anthropic_ratio']:.2f} (SDK / ours); against the floor "
        f"(ours / aiohttp + orjson): openai_chat {summary['openai_floor_ratio']:.2f} "
        f"anthropic {summary['anthropic_floor_ratio']:.2f}"
    )
    print(
        f"joined (stream.joined()) against the floor: openai_chat "
        f"{summary['joined_openai_floor_ratio']:.2f} "
        f"anthropic {summary['joined_anthropic_floor_ratio']:.2f}"
    )
    print(
        f"trickled: openai_ratio={summary['trickle_openai_ratio']:.2f} "
        f"anthropic_ratio={summary['trickle_anthropic_ratio']:.2f}; against the floor: "
        f"openai_chat {summary['trickle_openai_floor_ratio']:.2f} "
        f"anthropic {summary['trickle_anthropic_floor_ratio']:.2f}"
    )
    costs = _json_decode_costs(min(n, 5000))
    print(
        "JSON parse of the event payloads alone, µs per event: "
        + ", ".join(f"{k} {v:.2f}" for k, v in costs.items())
    )
    summary.update({f"decode_{k}": v for k, v in costs.items()})
    return summary


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--client" in argv:
        return client_main(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=decimal, default=5000)
    parser.add_argument("--runs", type=decimal, default=5)
    parser.add_argument("--trickle-events", type=decimal, default=1000)
    parser.add_argument("--trickle-runs", type=decimal, default=3)
    args = parser.parse_args(argv)
    run(args.events, args.runs, args.trickle_events, args.trickle_runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
