"""``relaybot run`` with no config (architecture §7 "Embedded default") serves the web page on a
loopback port beside the console and prints its address; the page's API answers with the
built-in demo model. The real command as a process, its page asked over HTTP."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import httpx

from tests.ops_harness import env
from tests.web_harness import WebClient

ADDRESS = re.compile(r"^relaybot: channel web \(web\) at (http://127\.0\.0\.1:\d+/)$")


async def test_the_default_prints_the_page_address_and_the_page_answers(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "orchestrator.cli", "run"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env(tmp_path),
        cwd=tmp_path,
    )
    assert process.stdin is not None and process.stderr is not None
    try:
        lines: list[str] = []
        while not any(ADDRESS.match(line) for line in lines):
            line = await asyncio.wait_for(process.stderr.readline(), 60)
            assert line, "relaybot ended before printing the page's address: " + "".join(lines)
            lines.append(line.decode().rstrip("\n"))
        (url,) = [m.group(1) for line in lines if (m := ADDRESS.match(line))]
        async with httpx.AsyncClient() as plain:
            page = await plain.get(url)
        assert page.status_code == 200 and "static/app.js" in page.text
        async with WebClient(url) as client:
            conversation = await client.new_conversation()
            events = await client.ask(conversation, "hello")
        answers = [e["text"] for e in events if e["type"] in ("send", "edit")]
        assert len(answers) >= 2  # it streamed
        assert 'You wrote: "hello"' in answers[-1] and "demo model" in answers[-1]
        process.stdin.close()  # the console's input ends: the run ends, page and all
        code = await asyncio.wait_for(process.wait(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 0
