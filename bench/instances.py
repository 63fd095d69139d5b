"""Several instances on one PostgreSQL store (architecture §9): answers per second and p99 time
to first edit with 1, 2 and 3 ``relaybot run`` processes.

``python -m bench.instances [--chats N] [--questions Q]`` (not part of ``python -m bench``: it
starts a PostgreSQL server and up to three daemons, about two minutes). For each instance count
it starts a fresh database on a real PostgreSQL server (the system's ``initdb``/``pg_ctl``, as
the tests do), the instances in Telegram webhook mode (the test suite's
:class:`tests.instances.Fleet`: the Telegram wire server delivers each update to one instance,
round-robin, as a load balancer would), and a loopback Chat Completions server answering every
question with about 500 characters in 40 deltas 25 ms apart (1 s per answer). N chats each send
Q questions at once; the figures:

* answers/s: questions answered divided by the time from the first question to the last
  answer's final edit;
* time to first edit, p50 and p99: from a question to the first message of its answer in the
  chat (its first draft, after the redaction holdback of 128 bytes), in seconds.

The questions of one chat are answered one at a time (architecture §5), so the figures are about
how the load spreads over the instances and the store, not about a single stream.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.args import decimal
from tests.instances import Fleet
from tests.peers.echo_model import EchoModel, slow_answer_to
from tests.peers.postgres import PASSWORD, PostgresServer, find_pg_bin
from tests.peers.telegram import TelegramBotApiServer

__all__ = ["measure", "run"]


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(
    server: PostgresServer, count: int, chats: int, questions: int
) -> dict[str, float]:
    """One run with ``count`` instances; returns answers_per_s, ttfe_p50_s, ttfe_p99_s."""
    os.environ["PGPASSWORD"] = PASSWORD
    url = server.new_database()
    with tempfile.TemporaryDirectory(prefix="relaybot-bench-") as directory:
        async with (
            TelegramBotApiServer() as peer,
            EchoModel(delay_secs=0.025, long_answers=True) as model,
            Fleet(Path(directory), peer, model, url, count, copies=1),
        ):
            asked: dict[str, float] = {}
            start = time.monotonic()
            for n in range(questions):
                for chat in range(1, chats + 1):
                    question = f"chat {chat} question {n}"
                    peer.inject_message(chat, question, user_id=chat)
                    asked[question] = time.monotonic()
            finals = {slow_answer_to(q) for q in asked}

            def done() -> bool:
                texts = [t for chat in range(1, chats + 1) for t in peer.texts(chat)]
                return sum(1 for t in texts if t in finals) >= len(asked)

            await peer.wait_for(done, within=600)
            elapsed = time.monotonic() - start
            first: dict[str, float] = {}
            for call in peer.calls_to("sendMessage"):
                text = str(call.params.get("text", ""))
                for question in asked:
                    # A first draft may end inside the quote: "Answer to «chat 3 question 0".
                    head = f"Answer to «{question}"
                    rest = text[len(head) : len(head) + 1]
                    if question not in first and text.startswith(head) and rest in ("", "»"):
                        first[question] = call.at
            ttfe = [first[q] - asked[q] for q in asked if q in first]
            if len(ttfe) != len(asked):
                raise RuntimeError(f"{len(asked) - len(ttfe)} answers' first messages not found")
    return {
        "answers_per_s": len(asked) / elapsed,
        "ttfe_p50_s": statistics.median(ttfe),
        "ttfe_p99_s": _p(ttfe, 0.99),
    }


def run(argv: list[str] | None = None) -> int:
    """The command line; prints one row per instance count. Exit 1 without PostgreSQL."""
    parser = argparse.ArgumentParser(prog="python -m bench.instances", description=__doc__)
    parser.add_argument("--chats", type=decimal, default=30, help="chats asking at once")
    parser.add_argument("--questions", type=decimal, default=3, help="questions per chat")
    parser.add_argument("--instances", default="1,2,3", help="instance counts to run")
    args = parser.parse_args(argv)
    bin_dir = find_pg_bin()
    if bin_dir is None:
        print("PostgreSQL is not installed (no pg_ctl)", file=sys.stderr)
        return 1
    server = PostgresServer(bin_dir)
    server.start()
    try:
        print(f"{args.chats} chats × {args.questions} questions, 1 s answers")
        print("instances  answers/s  first edit p50  p99")
        for count in (int(c) for c in args.instances.split(",")):
            figures = asyncio.run(measure(server, count, args.chats, args.questions))
            print(
                f"{count:>9}  {figures['answers_per_s']:>9.1f}  "
                f"{figures['ttfe_p50_s']:>12.2f} s  {figures['ttfe_p99_s']:.2f} s",
                flush=True,
            )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run())
